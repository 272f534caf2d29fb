//! Handles: small `Copy` values that stand for backend objects.
//!
//! A handle names the backend instance that issued it and an object id that is never reused,
//! so a backend can tell a live handle from a stale one (destroyed) or a foreign one (issued by
//! another backend instance) and answer with an error instead of undefined behaviour.

use std::sync::atomic::{AtomicU32, Ordering};

static NEXT_BACKEND_ID: AtomicU32 = AtomicU32::new(1);

/// Identifies one backend instance; handles carry it so foreign handles are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId(u32);

impl BackendId {
    /// Allocate an id that no other backend instance in this process has.
    pub fn fresh() -> Self {
        BackendId(NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed))
    }
}

macro_rules! handle {
    ($(#[$doc:meta])* $name:ident) => {
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
    };
}

handle!(
    /// An open device context (`struct ibv_context *`).
    ContextHandle
);
handle!(
    /// A protection domain (`struct ibv_pd *`).
    PdHandle
);
handle!(
    /// An mlx5dv mkey (`struct mlx5dv_mkey *`).
    MkeyHandle
);
handle!(
    /// A backend-owned buffer.
    BufHandle
);
handle!(
    /// A memory region (`struct ibv_mr *`).
    MrHandle
);
handle!(
    /// A completion queue (`struct ibv_cq *`).
    CqHandle
);
handle!(
    /// A queue pair (`struct ibv_qp *`).
    QpHandle
);
