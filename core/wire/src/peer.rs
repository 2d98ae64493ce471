//! Daemon ⇄ daemon control messages.
