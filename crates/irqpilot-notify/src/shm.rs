//! Memory shared between processes: `mmap(MAP_SHARED | MAP_ANONYMOUS)` holding one value, so a
//! [`NotifyCell`](crate::NotifyCell) or the benchmark's control block survives `fork()` at the
//! same address in parent and child.

use crate::error::NotifyError;
use rustix::mm::{MapFlags, ProtFlags, mmap_anonymous, munmap};
use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::ptr::NonNull;

/// Types that may be placed in memory shared by several processes.
///
/// # Safety
/// The type must hold no pointers or handles that mean something only in one process (no `Box`,
/// `Arc`, `Vec`, file descriptors it owns), must be usable through `&T` from several threads at
/// once (`Sync`, typically atomics), and must not need its destructor to run in every process.
pub unsafe trait ProcessShareable: Sync {}

/// One value of type `T` in its own `MAP_SHARED | MAP_ANONYMOUS` mapping. A child created by
/// `fork()` sees the same memory; the parent's drop unmaps it (a child that leaves with `_exit`
/// runs no destructor).
pub struct SharedMapping<T: ProcessShareable> {
    ptr: NonNull<T>,
    len: usize,
    _owns: PhantomData<T>,
}

// SAFETY: the mapping is owned by this value; `T: Sync` (required by `ProcessShareable`) makes
// shared access from other threads sound, and moving the owner to another thread is fine
// because `T` holds no thread-bound state (guaranteed by `ProcessShareable`).
unsafe impl<T: ProcessShareable> Send for SharedMapping<T> {}
// SAFETY: only `&T` is handed out and `T: Sync`.
unsafe impl<T: ProcessShareable> Sync for SharedMapping<T> {}

impl<T: ProcessShareable> SharedMapping<T> {
    /// Maps fresh shared memory and moves `value` into it.
    pub fn new(value: T) -> Result<SharedMapping<T>, NotifyError> {
        let len = std::mem::size_of::<T>().max(1);
        // SAFETY: a fresh anonymous mapping at an address the kernel chooses cannot alias any
        // existing Rust object.
        let raw = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
            )
        }
        .map_err(|errno| NotifyError::Map { bytes: len, errno })?;
        // mmap returns page-aligned memory, which satisfies any alignment `T` can ask for
        // (alignments above 4096 are not used in this crate).
        debug_assert!(std::mem::align_of::<T>() <= 4096);
        let ptr = NonNull::new(raw.cast::<T>()).ok_or(NotifyError::Map {
            bytes: len,
            errno: rustix::io::Errno::NOMEM,
        })?;
        // SAFETY: `ptr` is valid for writes of `size_of::<T>()` bytes and suitably aligned.
        unsafe { ptr.as_ptr().write(value) };
        Ok(SharedMapping {
            ptr,
            len,
            _owns: PhantomData,
        })
    }
}

impl<T: ProcessShareable> Deref for SharedMapping<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: initialised in `new`, alive until `drop`.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T: ProcessShareable> Drop for SharedMapping<T> {
    fn drop(&mut self) {
        // SAFETY: the value was written in `new` and is dropped exactly once, here.
        unsafe { std::ptr::drop_in_place(self.ptr.as_ptr()) };
        // SAFETY: `ptr`/`len` describe exactly the mapping made in `new`, and no reference into
        // it outlives `self`.
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

impl<T: ProcessShareable + fmt::Debug> fmt::Debug for SharedMapping<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SharedMapping").field(&**self).finish()
    }
}

/// A shared array of `u64` samples written by one process (the pinger child) and read by the
/// parent after that child has exited.
pub(crate) struct SharedSamples {
    ptr: NonNull<u64>,
    len: usize,
}

// SAFETY: plain memory owned by this value; access discipline is documented on the methods.
unsafe impl Send for SharedSamples {}

impl SharedSamples {
    /// Maps `len` zeroed samples (the kernel zero-fills; every page is touched once here so that
    /// no page fault lands in a timed loop).
    pub(crate) fn new(len: usize) -> Result<SharedSamples, NotifyError> {
        let bytes = (len.max(1)) * 8;
        // SAFETY: fresh anonymous mapping, aliases nothing.
        let raw = unsafe {
            mmap_anonymous(
                std::ptr::null_mut(),
                bytes,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
            )
        }
        .map_err(|errno| NotifyError::Map { bytes, errno })?;
        let ptr = NonNull::new(raw.cast::<u64>()).ok_or(NotifyError::Map {
            bytes,
            errno: rustix::io::Errno::NOMEM,
        })?;
        let mut s = SharedSamples { ptr, len };
        for v in s.as_mut_slice() {
            *v = 0;
        }
        Ok(s)
    }

    /// The samples, for writing. In a parent/child pair only one process may use this at a time
    /// (the child while it runs, the parent after reaping it).
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u64] {
        // SAFETY: `ptr` is valid for `len` u64s for the life of `self`; `&mut self` prevents
        // aliasing within this process, and the cross-process discipline is the caller's.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for SharedSamples {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping made in `new`; no borrow outlives `self`.
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len.max(1) * 8) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    struct Counter(AtomicU64);
    // SAFETY: an atomic integer only.
    unsafe impl ProcessShareable for Counter {}

    #[test]
    fn value_lives_in_the_mapping() {
        let m = SharedMapping::new(Counter(AtomicU64::new(7))).unwrap();
        m.0.fetch_add(1, Ordering::Relaxed);
        assert_eq!(m.0.load(Ordering::Relaxed), 8);
        let mut s = SharedSamples::new(1000).unwrap();
        assert!(s.as_mut_slice().iter().all(|&v| v == 0));
        s.as_mut_slice()[999] = 5;
        assert_eq!(s.as_mut_slice()[999], 5);
    }
}
