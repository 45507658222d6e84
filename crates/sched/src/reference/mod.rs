//! Exact reference models, slow and obviously correct, to check the algorithms against.
