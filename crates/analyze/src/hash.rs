//! The hot-path maps of the pass: hashbrown with blockmap's one-multiply hasher.
use std::hash::BuildHasherDefault;

pub use blockmap::hash::{fold, FoldHasher};

pub type FastMap<K, V> = hashbrown::HashMap<K, V, BuildHasherDefault<FoldHasher>>;
