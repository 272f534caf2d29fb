//! Scenarios of the free-running device: a program's own doorbell and CQ polling, an idle
//! process, and the eventfd round trip the latency compares with.

use std::ffi::c_void;
use std::ptr;
use std::sync::atomic::{Ordering, fence};

use mlx5_capi::dv::mlx5dv_init_obj;
use mlx5_capi::events::ibv_create_comp_channel;
use mlx5_hw::sys::mlx5dv::{mlx5dv_cq, mlx5dv_obj, mlx5dv_qp};

use super::CAbi;

/// A loopback pair whose send queue and CQ the program drives itself.
pub struct RawRing {
    pair: CAbi,
    qp: mlx5dv_qp,
    cq: mlx5dv_cq,
    qpn: u32,
    pi: u16,
    ci: u32,
    bf: usize,
    src: (u64, u32),
    dst: (u64, u32),
}

impl RawRing {
    pub fn new() -> Self {
        let pair = CAbi::new();
        // SAFETY: the pair's live objects; the out-structs are plain data.
        unsafe {
            let mut qp: mlx5dv_qp = std::mem::zeroed();
            let mut cq: mlx5dv_cq = std::mem::zeroed();
            let mut o: mlx5dv_obj = std::mem::zeroed();
            o.qp.in_ = pair.qp.cast();
            o.qp.out = &mut qp;
            o.cq.in_ = pair.cq.cast();
            o.cq.out = &mut cq;
            assert_eq!(mlx5dv_init_obj(&mut o, 3), 0, "mlx5dv_init_obj");
            let sge = &*pair.wr.sg_list;
            let (src, dst) = ((sge.addr, sge.lkey), (pair.wr.wr.rdma.remote_addr, pair.wr.wr.rdma.rkey));
            let qpn = (*pair.qp).qp_num;
            RawRing { pair, qp, cq, qpn, pi: 0, ci: 0, bf: 0, src, dst }
        }
    }

    /// One 64-byte WRITE rung with stores, then wait for its CQE in `cq.buf`.
    pub fn write_and_wait(&mut self) {
        // SAFETY: the ring, doorbell record and BlueFlame register mlx5dv_init_obj gave.
        unsafe {
            let slot = (self.qp.sq.buf as *mut u8).add(usize::from(self.pi) % self.qp.sq.wqe_cnt as usize * 64);
            let w = slot.cast::<u32>();
            w.write((u32::from(self.pi) << 8 | 0x08).to_be());
            w.add(1).write((self.qpn << 8 | 3).to_be());
            w.add(2).write(0x08u32.to_be()); // fm_ce_se: CQ update
            w.add(3).write(0);
            let r = slot.add(16).cast::<u64>();
            r.write(self.dst.0.to_be());
            r.add(1).cast::<u32>().write(self.dst.1.to_be());
            let d = slot.add(32).cast::<u32>();
            d.write(64u32.to_be());
            d.add(1).write(self.src.1.to_be());
            d.add(2).cast::<u64>().write(self.src.0.to_be());
            self.pi = self.pi.wrapping_add(1);
            fence(Ordering::Release);
            self.qp.dbrec.add(1).write_volatile(u32::from(self.pi).to_be());
            fence(Ordering::Release);
            let bf = self.qp.bf.reg.cast::<u8>().add(self.bf).cast::<u64>();
            bf.write_volatile(slot.cast::<u64>().read());
            self.bf ^= self.qp.bf.size as usize;
            let cqe = (self.cq.buf as *mut u8).add((self.ci & (self.cq.cqe_cnt - 1)) as usize * 64);
            let owner = u8::from(self.ci & self.cq.cqe_cnt != 0);
            loop {
                let op_own = cqe.add(63).read_volatile();
                if op_own >> 4 != 0xf && op_own & 1 == owner {
                    break;
                }
                std::hint::spin_loop();
            }
            self.ci += 1;
            self.cq.dbrec.write_volatile((self.ci & 0xff_ffff).to_be());
        }
        let _ = &self.pair;
    }
}

/// `n` round trips of an eventfd ping-pong between two threads, in microseconds.
pub fn eventfd_round_trips(n: usize) -> Vec<f64> {
    // SAFETY: eventfds of ours, read and written with 8-byte values.
    unsafe {
        let (ping, pong) = (libc::eventfd(0, 0), libc::eventfd(0, 0));
        let echo = std::thread::spawn(move || {
            let mut v = 0u64;
            for _ in 0..n {
                libc::read(ping, ptr::from_mut(&mut v).cast(), 8);
                libc::write(pong, ptr::from_ref(&v).cast(), 8);
            }
        });
        let mut out = Vec::with_capacity(n);
        let one = 1u64;
        let mut v = 0u64;
        for _ in 0..n {
            let t = std::time::Instant::now();
            libc::write(ping, ptr::from_ref(&one).cast(), 8);
            libc::read(pong, ptr::from_mut(&mut v).cast(), 8);
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let _ = echo.join();
        libc::close(ping);
        libc::close(pong);
        out
    }
}

/// What an idle RDMA program holds: two contexts, connected QPs, a CQ armed on a channel.
pub struct IdleObjects {
    _pair: CAbi,
    _second: CAbi,
}

impl IdleObjects {
    pub fn new() -> Self {
        let pair = CAbi::new();
        let second = CAbi::new();
        // SAFETY: the pair's live context and a CQ made on it.
        unsafe {
            let ch = ibv_create_comp_channel(pair.ctx);
            assert!(!ch.is_null(), "ibv_create_comp_channel");
            let cq = mlx5_capi::queue::ibv_create_cq(pair.ctx, 16, ptr::null_mut::<c_void>(), ch, 0);
            assert!(!cq.is_null(), "a CQ on the channel");
            let ops = &(*pair.ctx).ops;
            assert_eq!(ops.req_notify_cq.expect("req_notify_cq")(cq, 0), 0);
        }
        IdleObjects { _pair: pair, _second: second }
    }
}

/// CPU seconds this process's threads used so far.
pub fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
        t(u.ru_utime) + t(u.ru_stime)
    }
}
