"""`show()`: let the model see an image (a screenshot, a plot, a diagram).

The image is attached to the block's tool result: the model sees it together with the block's
output in its next request. The host checks, decodes and (when over the limits) scales it down
before anything is stored; the block's output says what was attached.
"""
from __future__ import annotations

from vis import _native

TYPE_CHECKING = False  # no `typing` import at start-up; type checkers take this as True
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any, Protocol

    class _Figure(Protocol):
        def savefig(self, fname: Any, *, format: str) -> Any: ...


#: Largest image file or bytes show() takes (the host scales it down to [images] max_edge and
#: max_bytes before sending it).
MAX_INPUT_BYTES = 32 * 1024 * 1024

_FORMATS = "PNG, JPEG, GIF or WebP"


class ShownImage(dict):  # type: ignore[type-arg]
    """What show() attached: a dict (`hash`, `format`, `width`, `height`, `bytes`, `caption`,
    `resized_from`) that prints as the placeholder line the output shows."""

    def __repr__(self) -> str:
        text = "[image %s×%s %s %s" % (
            self.get("width"),
            self.get("height"),
            _label(str(self.get("format", ""))),
            _size(int(self.get("bytes", 0))),
        )
        resized = self.get("resized_from")
        if resized:
            text += ", resized from %s×%s" % (resized[0], resized[1])
        if self.get("caption"):
            text += ": %s" % self["caption"]
        return text + "]"

    __str__ = __repr__


def show(image: str | PathLike[str] | bytes | bytearray | memoryview | _Figure | Any, caption: str | None = None) -> ShownImage:
    """Attach an image to this block's result, so the model sees it in its next request.

    `image` is one of:
    - a path in the workspace (or an artifact), confined like cat(): a path outside it is
      refused (PermissionError);
    - the bytes of a PNG, JPEG, GIF or WebP image (recognised by their first bytes, not by a
      file name);
    - a Matplotlib figure (anything with `savefig`: saved as PNG in memory), e.g.
      `fig, ax = plt.subplots(); ax.plot(xs); show(fig, "latency by hour")`;
    - a PIL image (saved as PNG in memory).

    `caption` (optional) says what the image is; it is kept with the image and shown with it.
    Images over the limits (`[images] max_edge`, default 1568 px on the long edge, and
    `max_bytes`) are scaled down, keeping the aspect ratio. A block may show up to
    `[images] max_per_block` images (default 8). Anything that is not an image, a damaged or
    truncated file, or one image too many raises ValueError/RuntimeError and nothing is
    attached. Prints one line saying what was attached, e.g.
    `[image 812×600 PNG 48 KB: latency by hour]`, and returns it (a ShownImage dict).
    A model that does not take images gets a one-line note instead of the image.
    """
    if caption is not None and not isinstance(caption, str):
        raise TypeError("show(image, caption): caption must be a string or None, got %s" % type(caption).__name__)
    data = _image_bytes(image)
    if len(data) > MAX_INPUT_BYTES:
        raise ValueError(
            "show(): the image is %d bytes; the limit is %d bytes (save a smaller one, or crop it)"
            % (len(data), MAX_INPUT_BYTES)
        )
    import binascii

    encoded = binascii.b2a_base64(data, newline=False).decode("ascii")
    reply = _native.host_call("show_image", {"data": encoded, "caption": caption})
    shown = ShownImage(reply)
    print(repr(shown))
    return shown


def _image_bytes(image: object) -> bytes:
    """The bytes of what show() was given."""
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if isinstance(image, str) or hasattr(image, "__fspath__"):
        import os

        path = os.fspath(image)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        data: bytes = _native.text_read_bytes(path, MAX_INPUT_BYTES)
        return data
    module = type(image).__module__ or ""
    if module.startswith("PIL.") and hasattr(image, "save"):
        import io

        buffer = io.BytesIO()
        image.save(buffer, format="PNG")
        return buffer.getvalue()
    savefig = getattr(image, "savefig", None)
    if savefig is None and hasattr(image, "get_figure"):
        # A Matplotlib Axes: show the figure it is drawn on.
        savefig = getattr(image.get_figure(), "savefig", None)
    if callable(savefig):
        import io

        buffer = io.BytesIO()
        savefig(buffer, format="png")
        return buffer.getvalue()
    raise TypeError(
        "show() takes a path, the bytes of a %s image, a Matplotlib figure or a PIL image; got %s"
        % (_FORMATS, type(image).__name__)
    )


def _label(format: str) -> str:
    return {"png": "PNG", "jpeg": "JPEG", "gif": "GIF", "webp": "WebP"}.get(format, format.upper())


def _size(n: int) -> str:
    if n < 1024:
        return "%d B" % n
    if n < 1024 * 1024:
        return "%d KB" % -(-n // 1024)
    return "%.1f MB" % (n / (1024 * 1024))
