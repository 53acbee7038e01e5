"""Images made training-ready at `data push` time: shrunk so their longer side is at most
`max_side` and re-encoded as JPEG at `quality`.

A loader then decodes a quarter of the pixels of a 500 x 375 photo or fewer, every epoch,
instead of the full-size file (bench/jpeg_decode.py measures what that buys per core). A file
that is a JPEG and already small enough is stored byte for byte, never re-encoded.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from PIL import Image, UnidentifiedImageError

from spotrun.core.errors import UsageError
from spotrun.datasets.manifest import StoredImages


def fitted_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    """(width, height) scaled so that the longer side is `max_side` (never enlarged)."""
    longer = max(width, height)
    if longer <= max_side:
        return width, height
    factor = max_side / longer
    return max(1, round(width * factor)), max(1, round(height * factor))


def training_ready(path: Path, form: StoredImages) -> bytes | None:
    """The file's training-ready JPEG bytes, or None when it should be stored as it is."""
    try:
        with Image.open(path) as image:
            width, height = image.size
            target = fitted_size(width, height, form.max_side)
            if target == (width, height) and image.format == "JPEG":
                return None
            if image.format == "JPEG":
                # libjpeg shrinks by up to 8x while decoding (never below the target): faster
                # and no worse than resizing from the full size.
                image.draft("RGB", (math.ceil(target[0]), math.ceil(target[1])))
            rgb = image.convert("RGB")
            if rgb.size != target:
                rgb = rgb.resize(target, Image.Resampling.LANCZOS)
            out = io.BytesIO()
            rgb.save(out, "JPEG", quality=form.quality)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise UsageError(
            f"cannot make {path} training-ready: {exc}",
            hint="remove or replace the file, or push without --max-side",
        ) from exc
    return out.getvalue()
