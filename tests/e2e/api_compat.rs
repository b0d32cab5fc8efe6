//! Kueue objects as a real API server stores and serves them (decoding, schema).
