"""The keyed type of the DDS instance tests (items_writer.py, items_reader.py):
`Item` = { @key long id; string text; }, named "Item" on the wire."""

from dataclasses import dataclass

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import key
from cyclonedds.idl.types import int32


@dataclass
class Item(IdlStruct, typename="Item"):
    id: int32
    key("id")
    text: str
