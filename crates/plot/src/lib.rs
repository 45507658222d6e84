//! pspat-plot: the one plot module (being filled in).
