//! pspat-shaper: the transparent shaper as a library (being filled in).
