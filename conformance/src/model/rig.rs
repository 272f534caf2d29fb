//! Running a signature or crypto scenario on a backend: a context of its own with a PD, one
//! CQ and two RC QPs connected to each other, the scenario's buffers, mkey and DEK, all
//! released afterwards, so that a scenario never changes the slots of the other ops.

use mlx5_dv::profile::{TEST_CREDENTIAL_ID, TEST_IMPORT_KEK_ID, test_credential, test_import_kek};
use mlx5_dv::{
    AccessFlags, Backend, Buf, ContextAttr, ContextHandle, CryptoAttr, CryptoLoginAttrEx, DekInitAttr, DvQpCreateFlags,
    DvQpInitAttr, Mkey, MkeyConfFlags, MkeyInitAttr, MkeyInitFlags, Mr, PdHandle, Qp, QpCap, QpDest, QpInitAttr,
    QpModify, SendFlags, Sge, SigBlockAttr, SigBlockAttrFlags, SigBlockDomain, SigT10dif, T10difFlags, WrOp, crypto,
    dv_qp, sig,
};

use super::outcome::Outcome;
use super::sig::{Corrupt, Crc, CrcFacts, Dom, SigOp};
use super::xts::{CryptoOp, DekMode, key_bytes, keytag};

const ACCESS: AccessFlags = AccessFlags::LOCAL_WRITE.union(AccessFlags::REMOTE_WRITE).union(AccessFlags::REMOTE_READ);

/// The objects every scenario runs on.
struct Rig {
    ctx: ContextHandle,
    pd: PdHandle,
    cq: mlx5_dv::Cq,
    qa: Qp,
    bufs: Vec<Buf>,
    /// Signaled WRs posted whose completions were not polled yet: a device that runs on its
    /// own (a card, the free-running simulator) completes them after the post returns.
    due: std::cell::Cell<usize>,
    /// Completions polled early (before reading a buffer), not handed out yet.
    held: std::cell::RefCell<Vec<(u32, Option<u32>)>>,
}

fn say<T, E: std::fmt::Display>(what: &str, r: Result<T, E>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

impl Rig {
    fn open(b: &mut dyn Backend, name: &str) -> Result<Rig, String> {
        let ctx = say("mlx5dv_open_device", b.open_device(name, Some(&ContextAttr::devx())))?;
        let rig = Rig::build(b, ctx);
        if rig.is_err() {
            let _ = b.close_device(ctx);
        }
        rig
    }

    fn build(b: &mut dyn Backend, ctx: ContextHandle) -> Result<Rig, String> {
        let pd = say("ibv_alloc_pd", b.alloc_pd(ctx))?;
        let cq = say("ibv_create_cq", b.create_cq(ctx, 64))?;
        // Room for the translations and the BSF inline (item 38).
        let cap = QpCap { max_send_wr: 16, max_recv_wr: 4, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 256 };
        let dv = DvQpInitAttr::new(DvQpCreateFlags::empty(), dv_qp::WITH_MKEY_CONFIGURE);
        let qa = say("create QP a", b.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, Some(dv))))?;
        let qb = say("create QP b", b.create_qp(&QpInitAttr::rc(pd, cq.handle, cap, Some(dv))))?;
        let port = say("ibv_query_port", b.query_port(ctx, 1))?;
        for (q, peer) in [(&qa, &qb), (&qb, &qa)] {
            for step in QpModify::connect(ACCESS, QpDest::to(peer, &port)) {
                say("connect", b.modify_qp(q, &step))?;
            }
        }
        Ok(Rig { ctx, pd, cq, qa, bufs: Vec::new(), due: 0.into(), held: Default::default() })
    }

    /// A buffer of `data` with an MR over all of it.
    fn region(&mut self, b: &mut dyn Backend, data: &[u8]) -> Result<(Buf, Mr), String> {
        let buf = say("alloc_buf", b.alloc_buf(data.len().max(1)))?;
        self.bufs.push(buf);
        say("write_buf", b.write_buf(&buf, 0, data))?;
        let mr = say("ibv_reg_mr", b.reg_mr(self.pd, buf.addr, data.len() as u64, ACCESS))?;
        Ok((buf, mr))
    }

    /// A configure of `mkey` over all of `mr` with `more` setters after access and layout.
    fn configure(&self, b: &mut dyn Backend, mkey: Mkey, mr: &Mr, more: Vec<WrOp>) -> Result<(), String> {
        say("the mkey configure chain", self.try_configure(b, mkey, mr, MkeyConfFlags::empty(), more))
    }

    /// [`Rig::configure`] with `conf_flags`, its errno kept.
    fn try_configure(
        &self,
        b: &mut dyn Backend,
        mkey: Mkey,
        mr: &Mr,
        conf_flags: MkeyConfFlags,
        more: Vec<WrOp>,
    ) -> mlx5_dv::Result<()> {
        let conf = WrOp::MkeyConfigure {
            wr_id: 1,
            flags: SendFlags::SIGNALED | SendFlags::INLINE,
            mkey,
            num_setters: 2 + more.len() as u8,
            conf_flags,
            comp_mask: 0,
        };
        let layout = WrOp::SetMkeyLayoutList(vec![Sge { addr: mr.addr, length: mr.length as u32, lkey: mr.lkey }]);
        let ops: Vec<WrOp> = [conf, WrOp::SetMkeyAccessFlags(ACCESS), layout].into_iter().chain(more).collect();
        b.post_send(&self.qa, &ops)?;
        self.due.set(self.due.get() + 1);
        Ok(())
    }

    /// An RDMA WRITE on QP a of `len` bytes at `(addr, lkey)` to `(raddr, rkey)`.
    fn write(
        &self,
        b: &mut dyn Backend,
        wr_id: u64,
        local: (u64, u32),
        remote: (u64, u32),
        len: usize,
    ) -> Result<(), String> {
        let op = WrOp::RdmaWrite {
            wr_id,
            flags: SendFlags::SIGNALED,
            rkey: remote.1,
            remote_addr: remote.0,
            sge: vec![Sge { addr: local.0, length: len as u32, lkey: local.1 }],
        };
        say("ibv_wr_rdma_write", b.post_send(&self.qa, &[op]))?;
        self.due.set(self.due.get() + 1);
        Ok(())
    }

    /// Wait for the completions of what was posted (until the wait deadline), so that a
    /// buffer read next holds what the WRs wrote; they are kept for [`Rig::poll`].
    fn settle(&self, b: &mut dyn Backend) -> Result<(), String> {
        let deadline = crate::harness::deadline::wait_until();
        while self.held.borrow().len() < self.due.get() {
            let w = say("ibv_poll_cq", b.poll_cq(&self.cq, 16))?;
            if w.is_empty() && std::time::Instant::now() >= deadline {
                break;
            }
            self.held.borrow_mut().extend(w.iter().map(|w| (w.status, (w.status == 0).then_some(w.opcode))));
        }
        Ok(())
    }

    /// Every completion the CQ holds, once those of what was posted came (or the wait
    /// deadline passed): `(status, opcode if success)`.
    fn poll(&self, b: &mut dyn Backend) -> Result<Vec<(u32, Option<u32>)>, String> {
        self.settle(b)?;
        let mut v = self.held.take();
        self.due.set(0);
        for _ in 0..16 {
            let w = say("ibv_poll_cq", b.poll_cq(&self.cq, 16))?;
            if w.is_empty() {
                break;
            }
            v.extend(w.iter().map(|w| (w.status, (w.status == 0).then_some(w.opcode))));
        }
        Ok(v)
    }

    /// The context and everything on it, then the buffers.
    fn close(self, b: &mut dyn Backend) {
        let _ = b.close_device(self.ctx);
        for x in &self.bufs {
            let _ = b.free_buf(x);
        }
    }
}

/// Run `f` on a rig of device `name`, released whatever `f` answers.
fn with_rig<T>(
    b: &mut dyn Backend,
    name: &str,
    f: impl FnOnce(&mut dyn Backend, &mut Rig) -> Result<T, String>,
) -> Result<T, String> {
    let mut rig = Rig::open(b, name)?;
    let r = f(b, &mut rig);
    rig.close(b);
    r
}

fn domain(block_size: u32, d: Option<Dom>) -> Option<SigBlockDomain> {
    d.map(|d| match d {
        Dom::T10(d) => {
            let dif = SigT10dif {
                bg_type: if d.csum { sig::BG_CSUM } else { sig::BG_CRC },
                bg: if d.bg_ones { 0xffff } else { 0 },
                app_tag: d.app,
                ref_tag: d.ref_tag,
                flags: T10difFlags::from_bits_retain(u16::from(d.remap) | u16::from(d.escape & 3) << 1),
            };
            SigBlockDomain::t10dif(block_size, dif)
        }
        Dom::Crc(c) => {
            let ones = if c.kind == sig::CRC64_XP10 { u64::MAX } else { u64::from(u32::MAX) };
            SigBlockDomain::crc(block_size, c.kind, if c.seed_ones { ones } else { 0 })
        }
    })
}

/// What the first kernel mlx5 device with DEVX and CRC signatures shows of its CRC PI: the
/// byte order a clean CRC32 (or CRC32C) PI validates in, inbound, with `mlx5dv_mkey_check`
/// reporting no error; then whether CRC64_XP10 PI made as CRC-64/NVME validates. `None`
/// where no device has CRC signatures or neither byte order validates.
pub fn probe_crc(b: &mut dyn Backend) -> Option<CrcFacts> {
    let caps = b.caps().device.sig;
    if caps.block_prot & mlx5_dv::sig_cap::PROT_CRC == 0 || caps.block_size & mlx5_dv::sig_cap::BLOCK_512 == 0 {
        return None;
    }
    let name = b.device_list().ok()?.into_iter().find(|d| d.kind == mlx5_dv::DeviceKind::Mlx5)?.name;
    let kind = if caps.crc_type & mlx5_dv::sig_cap::CRC32 != 0 { sig::CRC32 } else { sig::CRC32C };
    if caps.crc_type & (mlx5_dv::sig_cap::CRC32 | mlx5_dv::sig_cap::CRC32C) == 0 {
        return None;
    }
    let clean = |b: &mut dyn Backend, kind: u32, le: bool| {
        let op = SigOp {
            dev: 0,
            block_size: sig::BLOCK_512,
            blocks: 2,
            mem: None,
            wire: Some(Dom::Crc(Crc { kind, seed_ones: true })),
            check_mask: 0xff,
            inbound: true,
            n: 0,
            corrupt: [Corrupt::default(); 3],
            seed: 0x5a,
            rearm: false,
            reset: false,
            past_end: false,
            crc_le: le,
        };
        run_sig(b, &name, &op).is_ok_and(|o| o.checks.first() == Some(&mlx5_dv::MkeyErr::NONE))
    };
    let little_endian = match (clean(b, kind, true), clean(b, kind, false)) {
        (true, false) => true,
        (false, true) => false,
        _ => return None,
    };
    let crc64 = caps.crc_type & mlx5_dv::sig_cap::CRC64_XP10 != 0 && clean(b, sig::CRC64_XP10, little_endian);
    Some(CrcFacts { little_endian, crc64 })
}

/// A [`SigOp`] on device `name`.
pub(super) fn run_sig(b: &mut dyn Backend, name: &str, s: &SigOp) -> Result<Outcome, String> {
    let plan = s.plan().ok_or("a block size with no byte count")?;
    with_rig(b, name, |b, rig| {
        let (mem_len, wire_len) = (s.mem_len(plan.bs), s.wire_len(plan.bs));
        let input = &plan.input;
        let (mem, mr_m) = rig.region(b, &if s.inbound { vec![0; mem_len] } else { input.clone() })?;
        let (peer, mr_p) = rig.region(b, &if s.inbound { input.clone() } else { vec![0; wire_len] })?;
        let attr = MkeyInitAttr {
            pd: rig.pd,
            create_flags: MkeyInitFlags::INDIRECT | MkeyInitFlags::BLOCK_SIGNATURE,
            max_entries: 4,
        };
        let mkey = say("mlx5dv_create_mkey", b.create_mkey(&attr))?;
        let setter = (s.mem.is_some() || s.wire.is_some()).then(|| {
            WrOp::SetMkeySigBlock(SigBlockAttr {
                mem: domain(s.block_size, s.mem),
                wire: domain(s.block_size, s.wire),
                flags: SigBlockAttrFlags::empty(),
                check_mask: s.check_mask,
                copy_mask: 0,
                comp_mask: 0,
            })
        });
        rig.configure(b, mkey, &mr_m, setter.into_iter().collect())?;
        let transfer = |b: &mut dyn Backend, rig: &Rig| {
            if s.past_end {
                let block = wire_len / usize::from(s.blocks.max(1));
                rig.write(b, 2, (mr_p.addr, mr_p.lkey), (wire_len as u64, mkey.rkey), block)
            } else if s.inbound {
                rig.write(b, 2, (mr_p.addr, mr_p.lkey), (0, mkey.rkey), wire_len)
            } else {
                // Item 42: a local SGE of a signature mkey counts data bytes only.
                let data = usize::from(s.blocks) * plan.bs;
                rig.write(b, 2, (0, mkey.lkey), (mr_p.addr, mr_p.rkey), data)
            }
        };
        let check = |b: &mut dyn Backend| say("mlx5dv_mkey_check", b.mkey_check(&mkey));
        transfer(b, rig)?;
        // Polling consumes the signature-error CQE (item 47) before the check.
        let mut cqes = rig.poll(b)?;
        let mut checks = vec![check(b)?];
        if s.rearm {
            transfer(b, rig)?;
            cqes.extend(rig.poll(b)?);
            checks.push(check(b)?);
            let flags = if s.reset { MkeyConfFlags::RESET_SIG_ATTR } else { MkeyConfFlags::empty() };
            say("the re-arming configure", rig.try_configure(b, mkey, &mr_m, flags, Vec::new()))?;
            transfer(b, rig)?;
            cqes.extend(rig.poll(b)?);
            checks.push(check(b)?);
        }
        checks.push(check(b)?);
        let (name, buf, len) = if s.inbound { ("memory", mem, mem_len) } else { ("wire", peer, wire_len) };
        let bytes = vec![(name, say("read_buf", b.read_buf(&buf, 0, len))?)];
        Ok(Outcome { cqes, bytes, checks, refused: None, ..Outcome::default() })
    })
}

/// The DEK's key field: the key bytes, plaintext or wrapped under the test import KEK.
fn key_field(c: &CryptoOp, mode: DekMode) -> Result<[u8; crypto::KEY_LEN], String> {
    let plain = key_bytes(c);
    let mut field = [0u8; crypto::KEY_LEN];
    match mode {
        DekMode::Plain => field[..plain.len()].copy_from_slice(&plain),
        DekMode::Wrapped => {
            use aes_kw::KeyInit;
            let kw = aes_kw::KwAes256::new_from_slice(&test_import_kek()).map_err(|e| e.to_string())?;
            let n = kw.wrap_key(&plain, &mut field).map_err(|e| e.to_string())?.len();
            field[n..].fill(0);
        }
    }
    Ok(field)
}

/// A [`CryptoOp`] on device `name`, whose DEKs are made as `mode` says.
pub(super) fn run_crypto(
    b: &mut dyn Backend,
    name: &str,
    c: &CryptoOp,
    mode: DekMode,
    len: usize,
) -> Result<Outcome, String> {
    with_rig(b, name, |b, rig| {
        let (memory, wire) = c.forms(len).ok_or("a scenario with no forms")?;
        let (mem_len, wire_len) = (memory.len(), wire.len());
        let (mem, mr_m) = rig.region(b, &memory)?;
        let (peer, mr_p) = rig.region(b, &super::fill_pattern(wire_len, c.seed ^ 0xff))?;
        let login = match mode {
            DekMode::Plain => None,
            DekMode::Wrapped => {
                use aes_kw::KeyInit;
                let kw = aes_kw::KwAes256::new_from_slice(&test_import_kek()).map_err(|e| e.to_string())?;
                let mut credential = vec![0u8; test_credential().len() + 8];
                kw.wrap_key(&test_credential(), &mut credential).map_err(|e| e.to_string())?;
                let attr = CryptoLoginAttrEx {
                    credential_id: TEST_CREDENTIAL_ID,
                    import_kek_id: TEST_IMPORT_KEK_ID,
                    credential,
                    comp_mask: 0,
                };
                Some(say("mlx5dv_crypto_login_create", b.crypto_login_create(rig.ctx, &attr))?)
            }
        };
        let attr = DekInitAttr {
            key_size: if c.key256 { crypto::KEY_SIZE_256 } else { crypto::KEY_SIZE_128 },
            has_keytag: c.keytag,
            key_purpose: crypto::KEY_PURPOSE_AES_XTS,
            pd: rig.pd,
            opaque: *b"modelDEK",
            key: key_field(c, mode)?,
            comp_mask: crypto::DEK_INIT_ATTR_CRYPTO_LOGIN,
            crypto_login: login,
        };
        let dek = say("mlx5dv_dek_create", b.dek_create(rig.ctx, &attr))?;
        let mut create_flags = MkeyInitFlags::INDIRECT | MkeyInitFlags::CRYPTO;
        create_flags.set(MkeyInitFlags::BLOCK_SIGNATURE, c.sig.is_some());
        let mkey_attr = MkeyInitAttr { pd: rig.pd, create_flags, max_entries: 4 };
        let mkey = say("mlx5dv_create_mkey", b.create_mkey(&mkey_attr))?;
        let setter = c.attrs.then(|| {
            WrOp::SetMkeyCrypto(CryptoAttr {
                crypto_standard: crypto::STANDARD_AES_XTS,
                encrypt_on_tx: c.encrypt_on_tx,
                signature_crypto_order: c.order,
                data_unit_size: c.dus,
                initial_tweak: u128::from(c.tweak).to_le_bytes(),
                dek: Some(dek),
                keytag: keytag(c),
                comp_mask: 0,
            })
        });
        let sig_setter = c.sig.map(|w| {
            WrOp::SetMkeySigBlock(SigBlockAttr {
                mem: domain(w.block_size, w.memory.then_some(Dom::T10(w.dif))),
                wire: domain(w.block_size, w.wire.then_some(Dom::T10(w.dif))),
                flags: SigBlockAttrFlags::empty(),
                check_mask: 0xff,
                copy_mask: 0,
                comp_mask: 0,
            })
        });
        let setters = setter.into_iter().chain(sig_setter).collect();
        if c.sig.is_some_and(|w| w.both()) && c.raw_order() {
            let refused = rig.try_configure(b, mkey, &mr_m, MkeyConfFlags::empty(), setters).err().map(|e| e.errno());
            return Ok(Outcome { refused, cqes: rig.poll(b)?, ..Outcome::default() });
        }
        rig.configure(b, mkey, &mr_m, setters)?;
        let mut bytes = Vec::new();
        if c.attrs {
            // A local signature key counts data bytes (item 42).
            rig.write(b, 2, (0, mkey.lkey), (mr_p.addr, mr_p.rkey), len)?;
            rig.settle(b)?;
            bytes.push(("wire", say("read_buf", b.read_buf(&peer, 0, wire_len))?));
        }
        rig.write(b, 3, (mr_p.addr, mr_p.lkey), (0, mkey.rkey), wire_len)?;
        rig.settle(b)?;
        bytes.push(("memory", say("read_buf", b.read_buf(&mem, 0, mem_len))?));
        let cqes = rig.poll(b)?;
        let checks =
            if c.sig.is_some() && c.attrs { vec![say("mlx5dv_mkey_check", b.mkey_check(&mkey))?] } else { Vec::new() };
        let _ = b.destroy_mkey(&mkey);
        let _ = b.dek_destroy(dek);
        if let Some(l) = login {
            let _ = b.crypto_login_destroy(l);
        }
        Ok(Outcome { cqes, bytes, checks, refused: None, ..Outcome::default() })
    })
}
