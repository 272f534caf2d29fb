//! The API by family: each file holds a family's C-mirroring types and its trait.

pub mod context;
pub mod crypto;
pub mod devx;
pub mod memory;
pub mod mkey;
pub mod odp;
pub mod queue;
pub mod signature;
pub mod srq;
pub mod steering;
pub mod wq;
pub mod wr;
pub mod xrc;
