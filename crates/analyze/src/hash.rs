//! The hot-path maps of the pass: hashbrown with the trace crate's one-multiply hasher.
use std::hash::BuildHasherDefault;

pub use trace::hash::{fold, FoldHasher};

pub type FastMap<K, V> = hashbrown::HashMap<K, V, BuildHasherDefault<FoldHasher>>;
