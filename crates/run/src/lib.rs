//! pspat-run: the main job as a library (being filled in).
