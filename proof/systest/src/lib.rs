//! System tests: several processes against a real daemon.
