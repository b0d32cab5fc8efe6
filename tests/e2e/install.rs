//! Installing kuota: CRDs, conversion, manifests and the README walk-through.
