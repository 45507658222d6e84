//! pspat-expkit: the experiment kit's traffic tools (being filled in).
