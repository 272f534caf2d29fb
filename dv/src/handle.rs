//! Handles: small `Copy` values that stand for backend objects, and the table that checks them.
//!
//! A handle names the backend instance that issued it and an object id that is never reused,
//! so a backend can tell a live handle from a stale one (destroyed) or a foreign one (issued by
//! another backend instance) and answer with an error instead of undefined behaviour.
//!
//! A handle serializes as its object id alone; a deserialized handle belongs to no backend
//! (every backend answers EINVAL) unless it is read inside [`adopting`].

use std::sync::atomic::{AtomicU32, Ordering};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::errno::{EBUSY, EINVAL};
use crate::error::{Error, Op, Result};

static NEXT_BACKEND_ID: AtomicU32 = AtomicU32::new(1);

thread_local! {
    /// The backend that handles deserialized on this thread belong to ([`adopting`]).
    static ADOPTER: std::cell::Cell<BackendId> = const { std::cell::Cell::new(BackendId::NONE) };
}

/// Run `f` with every handle it deserializes belonging to `backend`: how a replayer maps a
/// trace's handles (object ids alone) onto the backend it replays on.
pub fn adopting<R>(backend: BackendId, f: impl FnOnce() -> R) -> R {
    let before = ADOPTER.with(|a| a.replace(backend));
    let r = f();
    ADOPTER.with(|a| a.set(before));
    r
}

/// Identifies one backend instance; handles carry it so foreign handles are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId(u32);

impl BackendId {
    /// The id of no backend: deserialized handles carry it.
    pub const NONE: BackendId = BackendId(0);

    /// Allocate an id that no other backend instance in this process has.
    pub fn fresh() -> Self {
        BackendId(NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed))
    }
}

/// What every handle type offers; [`HandleTable`] is generic over it.
pub trait Handle: Copy + std::fmt::Debug {
    /// The object kind, for error messages (`"PD"`).
    const KIND: &'static str;
    /// Make a handle; only backends call this.
    fn new(backend: BackendId, id: u32) -> Self;
    /// The backend instance that issued this handle.
    fn backend(self) -> BackendId;
    /// The backend-local object id.
    fn id(self) -> u32;
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name {
            backend: BackendId,
            id: u32,
        }

        impl $name {
            /// Make a handle; only backends call this.
            pub fn new(backend: BackendId, id: u32) -> Self {
                Self { backend, id }
            }

            /// The backend instance that issued this handle.
            pub fn backend(self) -> BackendId {
                self.backend
            }

            /// The backend-local object id.
            pub fn id(self) -> u32 {
                self.id
            }
        }

        impl Handle for $name {
            const KIND: &'static str = $kind;
            fn new(backend: BackendId, id: u32) -> Self {
                Self { backend, id }
            }
            fn backend(self) -> BackendId {
                self.backend
            }
            fn id(self) -> u32 {
                self.id
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                s.serialize_u32(self.id)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                Ok(Self { backend: ADOPTER.with(|a| a.get()), id: u32::deserialize(d)? })
            }
        }
    };
}

handle!(
    /// An open device context (`struct ibv_context *`).
    ContextHandle,
    "context"
);
handle!(
    /// A protection domain (`struct ibv_pd *`).
    PdHandle,
    "PD"
);
handle!(
    /// An mlx5dv mkey (`struct mlx5dv_mkey *`).
    MkeyHandle,
    "mkey"
);
handle!(
    /// A backend-owned buffer.
    BufHandle,
    "buffer"
);
handle!(
    /// A memory region (`struct ibv_mr *`).
    MrHandle,
    "MR"
);
handle!(
    /// A completion queue (`struct ibv_cq *`).
    CqHandle,
    "CQ"
);
handle!(
    /// A queue pair (`struct ibv_qp *`).
    QpHandle,
    "QP"
);
handle!(
    /// A data encryption key (`struct mlx5dv_dek *`).
    DekHandle,
    "DEK"
);
handle!(
    /// A crypto login object (`struct mlx5dv_crypto_login_obj *`).
    CryptoLoginHandle,
    "crypto login"
);
handle!(
    /// A DEVX object (`struct mlx5dv_devx_obj *`).
    DevxObjHandle,
    "DEVX object"
);
handle!(
    /// A DEVX UAR (`struct mlx5dv_devx_uar *`).
    UarHandle,
    "UAR"
);
handle!(
    /// A DEVX umem (`struct mlx5dv_devx_umem *`).
    UmemHandle,
    "umem"
);
handle!(
    /// An MSI-X vector of a VFIO context (`struct mlx5dv_devx_msi_vector *`).
    MsiVectorHandle,
    "MSI vector"
);
handle!(
    /// A DEVX event queue (`struct mlx5dv_devx_eq *`).
    EqHandle,
    "EQ"
);
handle!(
    /// A shared receive queue (`struct ibv_srq *`).
    SrqHandle,
    "SRQ"
);
handle!(
    /// An XRC domain (`struct ibv_xrcd *`).
    XrcdHandle,
    "XRCD"
);
handle!(
    /// Device memory (`struct ibv_dm *`).
    DmHandle,
    "DM"
);
handle!(
    /// A memory window (`struct ibv_mw *`).
    MwHandle,
    "MW"
);
handle!(
    /// A receive work queue (`struct ibv_wq *`).
    WqHandle,
    "WQ"
);
handle!(
    /// A receive WQ indirection table (`struct ibv_rwq_ind_table *`).
    RwqIndTableHandle,
    "RWQ indirection table"
);

#[derive(Debug, Clone)]
struct Entry<T> {
    value: T,
    users: u32,
}

/// One id issued by a table, and its object until removed.
#[derive(Debug, Clone)]
struct Slot<T> {
    id: u32,
    entry: Option<Entry<T>>,
}

/// The objects of one kind that a backend instance holds, by handle.
///
/// A stale handle (destroyed) or a foreign one (another backend's) is EINVAL; an object that
/// others still use cannot be removed (EBUSY). Use counts are changed only through
/// [`HandleTable::acquire`] and [`HandleTable::release`]. Ids are never reused.
#[derive(Debug, Clone)]
pub struct HandleTable<H, T> {
    backend: BackendId,
    next: u32,
    /// By id, ascending (ids only grow, so an insert appends): a binary search finds a handle,
    /// and create/destroy churn neither allocates nor moves tree nodes as a map would.
    /// Removing leaves an empty slot; they are swept once they are half of the vector.
    slots: Vec<Slot<T>>,
    /// Slots whose object was removed.
    dead: usize,
    _handle: std::marker::PhantomData<H>,
}

impl<H: Handle, T> HandleTable<H, T> {
    /// An empty table for handles issued by `backend`.
    pub fn new(backend: BackendId) -> Self {
        HandleTable { backend, next: 1, slots: Vec::new(), dead: 0, _handle: std::marker::PhantomData }
    }

    /// Store `value` and issue its handle; EINVAL once 2^32 - 1 ids were issued.
    pub fn insert(&mut self, op: Op, value: T) -> Result<H> {
        let id = self.next;
        self.next = id.checked_add(1).ok_or_else(|| Error::new(op, EINVAL, format!("{} ids exhausted", H::KIND)))?;
        self.slots.push(Slot { id, entry: Some(Entry { value, users: 0 }) });
        Ok(H::new(self.backend, id))
    }

    /// Where id `id` sits in `slots`, live or not.
    #[inline]
    fn position(&self, id: u32) -> Option<usize> {
        self.slots.binary_search_by_key(&id, |s| s.id).ok()
    }

    #[inline]
    fn live(&self, id: u32) -> Option<&Entry<T>> {
        self.slots.get(self.position(id)?)?.entry.as_ref()
    }

    #[inline]
    fn live_mut(&mut self, id: u32) -> Option<&mut Entry<T>> {
        let at = self.position(id)?;
        self.slots.get_mut(at)?.entry.as_mut()
    }

    // Every call through the trait looks its handles up: the lookups are inlined, their
    // errors built out of line.
    #[inline]
    fn check_backend(&self, h: H, op: Op) -> Result<()> {
        if h.backend() != self.backend {
            return Err(Self::foreign(op));
        }
        Ok(())
    }

    #[cold]
    fn foreign(op: Op) -> Error {
        Error::new(op, EINVAL, format!("the {} handle belongs to another backend instance", H::KIND))
    }

    #[cold]
    fn stale(op: Op) -> Error {
        Error::new(op, EINVAL, format!("the {} was destroyed (stale handle)", H::KIND))
    }

    #[inline]
    fn entry(&self, h: H, op: Op) -> Result<&Entry<T>> {
        self.check_backend(h, op)?;
        self.live(h.id()).ok_or_else(|| Self::stale(op))
    }

    #[inline]
    fn entry_mut(&mut self, h: H, op: Op) -> Result<&mut Entry<T>> {
        self.check_backend(h, op)?;
        self.live_mut(h.id()).ok_or_else(|| Self::stale(op))
    }

    /// The object behind a live handle of this backend.
    #[inline]
    pub fn get(&self, h: H, op: Op) -> Result<&T> {
        Ok(&self.entry(h, op)?.value)
    }

    /// The object behind a live handle, mutably.
    #[inline]
    pub fn get_mut(&mut self, h: H, op: Op) -> Result<&mut T> {
        Ok(&mut self.entry_mut(h, op)?.value)
    }

    /// Whether the handle names a live object of this table.
    pub fn contains(&self, h: H) -> bool {
        h.backend() == self.backend && self.live(h.id()).is_some()
    }

    /// How many users the object has.
    pub fn users(&self, h: H, op: Op) -> Result<u32> {
        Ok(self.entry(h, op)?.users)
    }

    /// Count one more user of the object (an mkey of a PD, a QP of a CQ).
    #[inline]
    pub fn acquire(&mut self, h: H, op: Op) -> Result<()> {
        let e = self.entry_mut(h, op)?;
        e.users = e.users.checked_add(1).ok_or_else(|| Error::new(op, EBUSY, format!("{} use count full", H::KIND)))?;
        Ok(())
    }

    /// Count one user fewer; a no-op at zero or for a handle already gone (teardown order).
    #[inline]
    pub fn release(&mut self, h: H) {
        if h.backend() == self.backend
            && let Some(e) = self.live_mut(h.id())
        {
            e.users = e.users.saturating_sub(1);
        }
    }

    /// Remove the object; EBUSY while it has users, EINVAL for a stale or foreign handle.
    pub fn remove(&mut self, h: H, op: Op) -> Result<T> {
        let users = self.entry(h, op)?.users;
        if users > 0 {
            return Err(Error::new(op, EBUSY, format!("the {} is still in use by {users} object(s)", H::KIND)));
        }
        self.take(h, op)
    }

    /// Remove the object whatever its use count (a context's objects when it closes).
    pub fn take(&mut self, h: H, op: Op) -> Result<T> {
        self.check_backend(h, op)?;
        let at = self.position(h.id()).ok_or_else(|| Self::stale(op))?;
        let e = self.slots.get_mut(at).and_then(|s| s.entry.take()).ok_or_else(|| Self::stale(op))?;
        self.one_more_dead();
        Ok(e.value)
    }

    /// [`HandleTable::take`] for a caller that has no use for the object: it is dropped where
    /// it lies instead of being moved out.
    pub fn discard(&mut self, h: H, op: Op) -> Result<()> {
        self.check_backend(h, op)?;
        let at = self.position(h.id()).ok_or_else(|| Self::stale(op))?;
        match self.slots.get_mut(at) {
            Some(s) if s.entry.is_some() => s.entry = None,
            _ => return Err(Self::stale(op)),
        }
        self.one_more_dead();
        Ok(())
    }

    /// Count a slot just emptied; sweep the empty ones once they are half of the vector.
    fn one_more_dead(&mut self) {
        self.dead = self.dead.saturating_add(1);
        if self.dead.saturating_mul(2) > self.slots.len() {
            self.slots.retain(|s| s.entry.is_some());
            self.dead = 0;
        }
    }

    /// Live handles and their objects, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = (H, &T)> {
        self.slots.iter().filter_map(|s| Some((H::new(self.backend, s.id), &s.entry.as_ref()?.value)))
    }

    /// Live handles and their objects, mutably, oldest first.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (H, &mut T)> {
        let backend = self.backend;
        self.slots.iter_mut().filter_map(move |s| Some((H::new(backend, s.id), &mut s.entry.as_mut()?.value)))
    }

    /// The handles whose objects satisfy `pred`, oldest first.
    pub fn handles_where(&self, mut pred: impl FnMut(&T) -> bool) -> Vec<H> {
        self.iter().filter(|(_, v)| pred(v)).map(|(h, _)| h).collect()
    }

    /// The number of live objects.
    pub fn len(&self) -> usize {
        self.slots.len().saturating_sub(self.dead)
    }

    /// No live objects.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_busy_handles_are_refused() -> Result<()> {
        let me = BackendId::fresh();
        let mut t: HandleTable<PdHandle, &str> = HandleTable::new(me);
        let a = t.insert(Op::AllocPd, "a")?;
        let foreign = PdHandle::new(BackendId::fresh(), a.id());
        assert_eq!(t.get(foreign, Op::AllocPd).map_err(|e| e.errno()), Err(EINVAL));
        t.acquire(a, Op::CreateMkey)?;
        assert_eq!(t.remove(a, Op::DeallocPd).map_err(|e| e.errno()), Err(EBUSY));
        t.release(a);
        assert_eq!(t.remove(a, Op::DeallocPd)?, "a");
        assert_eq!(t.get(a, Op::DeallocPd).map_err(|e| e.errno()), Err(EINVAL));
        let b = t.insert(Op::AllocPd, "b")?;
        assert_ne!(a.id(), b.id(), "ids are never reused");
        Ok(())
    }

    #[test]
    fn removals_keep_lookups_and_order_through_sweeps() -> Result<()> {
        let mut t: HandleTable<MkeyHandle, u32> = HandleTable::new(BackendId::fresh());
        let hs = (0..10).map(|i| t.insert(Op::CreateMkey, i)).collect::<Result<Vec<_>>>()?;
        for h in hs.iter().step_by(2) {
            t.take(*h, Op::DestroyMkey)?;
        }
        assert_eq!(t.take(hs[0], Op::DestroyMkey).map_err(|e| e.errno()), Err(EINVAL));
        let kept = t.insert(Op::CreateMkey, 10)?;
        for h in hs.iter().skip(1).step_by(4).take(2) {
            t.take(*h, Op::DestroyMkey)?;
        }
        t.discard(hs[7], Op::DestroyMkey)?;
        assert_eq!(t.discard(hs[7], Op::DestroyMkey).map_err(|e| e.errno()), Err(EINVAL));
        let left: Vec<u32> = t.iter().map(|(_, v)| *v).collect();
        assert_eq!(left, [3, 9, 10]);
        assert_eq!(t.len(), 3);
        assert_eq!(*t.get(kept, Op::CreateMkey)?, 10);
        assert_eq!(*t.get(hs[9], Op::CreateMkey)?, 9);
        assert!(!t.contains(hs[5]));
        Ok(())
    }

    #[test]
    fn a_deserialized_handle_belongs_to_no_backend() -> std::result::Result<(), serde_json::Error> {
        let h = MkeyHandle::new(BackendId::fresh(), 7);
        let text = serde_json::to_string(&h)?;
        assert_eq!(text, "7");
        let back: MkeyHandle = serde_json::from_str(&text)?;
        assert_eq!((back.id(), back.backend()), (7, BackendId::NONE));
        Ok(())
    }
}
