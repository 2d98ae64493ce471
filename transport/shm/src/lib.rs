//! tagwire-shm
