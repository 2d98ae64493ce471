//! Cache hints for the writer's buffers (see [`buffer`]).

use std::sync::Arc;

/// Asks the CPU to bring the next pooled buffer (its bytes and its
/// reference count) into cache while this datagram is encoded: a buffer
/// comes back from a window of hundreds of datagrams cold, and the next
/// encoding would wait for every line of it.
#[inline]
pub(crate) fn buffer(b: &Arc<Vec<u8>>) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let head = Arc::as_ptr(b).cast::<i8>();
        let bytes = b.as_ptr().cast::<i8>();
        // SAFETY: SSE is part of every x86_64 CPU, and a prefetch is a
        // hint that makes no access (any address is allowed).
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(head);
            for off in (0..b.capacity()).step_by(64) {
                _mm_prefetch::<_MM_HINT_T0>(bytes.wrapping_add(off));
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = b;
}
