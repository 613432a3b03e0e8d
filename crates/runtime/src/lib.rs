//! tirx-runtime (in progress)
