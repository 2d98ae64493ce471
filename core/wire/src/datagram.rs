//! Data-path datagrams (written by the reliable-delivery helper).
