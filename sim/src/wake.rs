//! The doorbell of a free-running simulator's device thread.

/// How a free-running simulator wakes its device thread after a doorbell rung through the
/// API (an eventfd write, a condition variable): cheap, and safe to call with the
/// simulator borrowed.
#[derive(Clone)]
pub struct Wake(std::sync::Arc<dyn Fn() + Send + Sync>);

impl Wake {
    /// A doorbell that calls `f`.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> Self {
        Wake(std::sync::Arc::new(f))
    }

    /// Ring it.
    pub fn ring(&self) {
        (self.0)();
    }
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Wake")
    }
}
