//! Host memory, as devices see it: one DMA interface over two kinds of region, buffers the
//! backend owns ([`Host::alloc`]) and an application's own bytes ([`Host::register_external`]);
//! a dma-buf exporter over them ([`Host::dmabufs`]); and the eventfds of interrupt vectors
//! ([`Host::irqs`]).

mod dmabuf;
mod eventfd;
mod memory;

pub use dmabuf::{Export, Exporter};
pub use eventfd::{EventFd, Irqs};
pub use memory::{PAGE, RangeCursor, place};

/// What a device does to host memory: bounds-checked reads and writes at host addresses.
pub trait Dma {
    /// The bytes at `[addr, addr + len)`, if one region maps them all.
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]>;
    /// Copy `bytes` to `addr`; false (nothing written) if one region does not map them all.
    fn write(&mut self, addr: u64, bytes: &[u8]) -> bool;
}

/// The simulated host's memory.
#[derive(Debug, Clone, Default)]
pub struct Host {
    mem: memory::Memory,
    /// The dma-buf exports over this host's memory.
    pub dmabufs: Exporter,
    /// The eventfds bound to MSI-X vectors.
    pub irqs: Irqs,
    /// Where the queue being made takes its buffers ([`Host::alloc_queue`]).
    queue_alloc: Option<QueueAllocator>,
}

impl Host {
    /// A host whose buffers may hold `limit` bytes together.
    pub fn with_memory_limit(limit: u64) -> Self {
        Host { mem: memory::Memory::with_limit(limit), ..Host::default() }
    }
}

/// What a queue buffer is for, as libmlx5 tells a parent domain's allocator
/// (`MLX5DV_RES_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueBuffer {
    /// A QP's receive and send queues, and the larger of their WQE strides.
    Qp {
        /// Bytes.
        stride: u32,
    },
    /// A CQ's ring.
    Cq,
    /// An SRQ's WQEs.
    Srq,
    /// A doorbell record (8 bytes).
    Dbr,
}

/// A program's answer for one queue buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueMemory {
    /// The simulator maps the buffer (`IBV_ALLOCATOR_USE_DEFAULT`).
    Default,
    /// The program's own memory at this address, at least as long as asked and valid until
    /// the queue is destroyed; it gives the memory back itself, after that.
    Given(u64),
    /// The allocator failed: the queue is not made (ENOMEM).
    Failed,
}

/// A program's allocator of queue memory (a parent domain's), asked for each buffer of the
/// queue being made with its length.
#[derive(Clone)]
pub struct QueueAllocator(pub std::sync::Arc<dyn Fn(usize, QueueBuffer) -> QueueMemory + Send + Sync>);

impl std::fmt::Debug for QueueAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueueAllocator")
    }
}

impl Dma for Host {
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        self.mem.read(addr, len)
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) -> bool {
        self.mem.write(addr, bytes)
    }
}

impl Host {
    /// From now on [`Host::alloc`] takes memory from the process, at its own address: the
    /// rings, doorbell records and UAR pages a program is handed pointers to.
    pub fn allocate_in_process(&mut self) {
        self.mem.allocate_in_process();
    }

    /// True once [`Host::allocate_in_process`] was called: a program may hold pointers into
    /// the backend's buffers and write them.
    pub fn in_process(&self) -> bool {
        self.mem.in_process()
    }

    /// Map `len` zeroed bytes the backend owns at a fresh page-aligned address; `None` when
    /// the host's memory or address space runs out.
    pub fn alloc(&mut self, len: usize) -> Option<u64> {
        self.mem.alloc(len)
    }

    /// Let `alloc` answer for the buffers of the queues made from now on (until set to
    /// `None`): a parent domain's allocators, asked while its queue is made.
    pub fn set_queue_allocator(&mut self, alloc: Option<QueueAllocator>) {
        self.queue_alloc = alloc;
    }

    /// Map a queue's buffer of `len` bytes (zeroed): the program's memory when a queue
    /// allocator gives it, else [`Host::alloc`]'s. A doorbell record maps 8 bytes of given
    /// memory (what libmlx5 asks an allocator for). `None` when the allocator fails or memory
    /// runs out.
    pub fn alloc_queue(&mut self, len: usize, kind: QueueBuffer) -> Option<u64> {
        let answer = self.queue_alloc.as_ref().map_or(QueueMemory::Default, |a| (a.0)(len, kind));
        match answer {
            QueueMemory::Default => self.alloc(len),
            QueueMemory::Failed => None,
            QueueMemory::Given(va) => {
                let len = if kind == QueueBuffer::Dbr { len.min(8) } else { len };
                // SAFETY: the allocator's contract: `len` bytes at `va`, the queue's alone
                // until it is destroyed (and unmapped here first).
                let va = unsafe { self.mem.register_external(va as *mut u8, len) }?;
                self.mem.write(va, &vec![0; len]).then_some(va)
            }
        }
    }

    /// Map an application's `len` bytes at `ptr`, at their own address; `None` for a null or
    /// empty range, one that wraps, or one that overlaps mapped memory.
    ///
    /// # Safety
    ///
    /// `[ptr, ptr + len)` must be valid for reads and writes, and nothing else may read or
    /// write it, until [`Host::unmap`] unmaps it.
    pub unsafe fn register_external(&mut self, ptr: *mut u8, len: usize) -> Option<u64> {
        // SAFETY: the caller's contract is the memory's.
        unsafe { self.mem.register_external(ptr, len) }
    }

    /// Unmap the region starting at `addr`.
    pub fn unmap(&mut self, addr: u64) -> bool {
        self.mem.free(addr)
    }

    /// Unmap the buffer at `[addr, addr + len)`: the backend's own region there, or one
    /// registration of the application's memory.
    pub fn unmap_buf(&mut self, addr: u64, len: usize) -> bool {
        self.mem.free(addr) || self.mem.free_external(addr, len)
    }

    /// Let the device reach the process's `[addr, addr + len)` without pinning it (an ODP MR
    /// in process): every access faults its pages in, and one to pages the process has not
    /// mapped fails as unmapped memory, with no signal. A range lent twice counts twice.
    pub fn lend(&mut self, addr: u64, len: u64) {
        self.mem.lend(addr, len);
    }

    /// Take back one [`Host::lend`] of `[addr, addr + len)`.
    pub fn unlend(&mut self, addr: u64, len: u64) {
        self.mem.unlend(addr, len);
    }

    /// Fault `[addr, addr + len)` in for reading (or writing), as an ODP prefetch does; false
    /// if a page is not mapped or refuses the access.
    pub fn fault_in(&self, addr: u64, len: u64, write: bool) -> bool {
        self.mem.fault_in(addr, len, write)
    }

    /// True if one region maps `[addr, addr + len)`.
    pub fn is_mapped(&self, addr: u64, len: u64) -> bool {
        self.mem.is_mapped(addr, len)
    }

    /// Copy from the `src` ranges to the `dst` ranges in order; false if a range is unmapped.
    pub fn transfer(&mut self, src: &[(u64, u64)], dst: &[(u64, u64)]) -> bool {
        self.mem.transfer(src, dst)
    }

    /// Run `f` on two ranges in different regions; `None` if they share one or are unmapped.
    pub fn with_two<R>(
        &mut self,
        src: (u64, u64),
        dst: (u64, u64),
        f: impl FnOnce(&[u8], &mut [u8]) -> R,
    ) -> Option<R> {
        self.mem.with_two(src.0, src.1, dst.0, dst.1, f)
    }

    /// Fill `out` from the cursor's ranges; false if they end first or are unmapped.
    pub fn read_ranges(&self, cur: &mut RangeCursor<'_>, out: &mut [u8]) -> bool {
        self.mem.read_ranges(cur, out)
    }

    /// Write `data` to the cursor's ranges; false if they end first or are unmapped.
    pub fn write_ranges(&mut self, cur: &mut RangeCursor<'_>, data: &[u8]) -> bool {
        self.mem.write_ranges(cur, data)
    }

    /// Write `data` at `addr` with its last byte stored last, with release ordering: how a
    /// CQE or an EQE is handed to a program that polls its ring; false if unmapped.
    pub fn publish(&mut self, addr: u64, data: &[u8]) -> bool {
        self.mem.publish(addr, data)
    }

    /// The bytes at `[addr, addr + len)` of one region, to change in place; `None` if
    /// unmapped.
    pub fn bytes_mut(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        self.mem.bytes_mut(addr, len)
    }
}
