//! How a long pass over a trace says how far it has come. Libraries call it; the CLI draws a
//! progress bar from it (and nothing when stderr is not a terminal). Nothing here prints.

/// Told, in records, how far a pass has come. Called from the threads that run the pass
/// (`analyze` analyses several streams at once), hence `Sync`.
pub trait Progress: Sync {
    /// The pass will handle `total` records (known from the chunk index, without decoding).
    fn start(&self, _total: u64) {}
    /// `records` more were handled.
    fn advance(&self, _records: u64) {}
}

/// Progress that nobody watches.
pub struct NoProgress;

impl Progress for NoProgress {}
