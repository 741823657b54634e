"""`_media` -- what an attachment (an image, a PDF, audio, video) costs a model, estimated from its bytes.

A message's text holds an attachment as a short placeholder (`[binary image/png, 1843290 bytes]`, ~10 tokens),
while the provider turns the attachment into tokens of its own: a 1280 x 800 screenshot is ~1,365 tokens to
Anthropic. Counted by its placeholder alone, a run that attaches screenshots never reached its high-water mark
while the context the provider saw overflowed. These estimates follow the published rules of the provider that
charges more, so compaction starts early rather than late; the exact figure is the provider's to say.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pydantic_ai.messages import BinaryContent, FileUrl, ModelMessage

__all__ = ('IMAGE_TOKENS', 'PDF_PAGE_TOKENS', 'attachment_tokens', 'attachments', 'image_tokens')

IMAGE_TOKENS: Final = 1_600
"""An image whose size is unknown (a URL, unreadable bytes): Anthropic's largest, an image at its size limit."""
_PIXELS_PER_TOKEN: Final = 750
_MAX_EDGE: Final = 1_568
_MAX_PIXELS: Final = 1_150_000
"""Anthropic scales an image down to at most 1,568 pixels on its long edge and about 1.15 megapixels, then
charges one token per 750 pixels (OpenAI's tiles come to less: 765 tokens for 1024 x 1024 against 1,398)."""
PDF_PAGE_TOKENS: Final = 1_600
"""A PDF page, read as its text and as an image of the page (Anthropic: 1,500-3,000 tokens a page)."""
_AUDIO_BYTES_PER_TOKEN: Final = 500
"""Audio at 128 kbit/s is 16 kB a second, and Gemini charges 32 tokens a second."""
_VIDEO_BYTES_PER_TOKEN: Final = 1_000
"""Video at 2 Mbit/s is 250 kB a second, and Gemini charges 263 tokens a second."""
_PDF_PAGE: Final = re.compile(rb'/Type\s*/Page(?![a-zA-Z])')


def attachments(message: ModelMessage) -> Iterator[BinaryContent | FileUrl]:
    """The binary contents and file URLs of a message's parts (user prompts and tool returns)."""
    from pydantic_ai.messages import BinaryContent, FileUrl

    for part in message.parts:
        content = getattr(part, 'content', None)
        for item in content if isinstance(content, list | tuple) else (content,):
            if isinstance(item, BinaryContent | FileUrl):
                yield item


def attachment_tokens(message: ModelMessage, count_text: Callable[[str], int] | None = None) -> int:
    """Estimated tokens of a message's attachments, beyond their placeholders in its text.

    Args:
        message: Any pydantic-ai message.
        count_text: Counts a text attachment's tokens; without it, its UTF-8 bytes are the count (an upper bound).
    """
    return sum(_item_tokens(item, count_text) for item in attachments(message))


def image_tokens(width: int, height: int) -> int:
    """Tokens of an image of `width` x `height` pixels, after the provider scales it down."""
    if width <= 0 or height <= 0:
        return IMAGE_TOKENS
    scale = min(1.0, _MAX_EDGE / max(width, height), math.sqrt(_MAX_PIXELS / (width * height)))
    return max(1, math.ceil(width * scale * height * scale / _PIXELS_PER_TOKEN))


def _item_tokens(item: BinaryContent | FileUrl, count_text: Callable[[str], int] | None) -> int:
    from pydantic_ai.messages import BinaryContent, ImageUrl

    if not isinstance(item, BinaryContent):
        return IMAGE_TOKENS if isinstance(item, ImageUrl) else 0  # other URLs: the provider's to fetch and count
    media_type = item.media_type.lower()
    if item.is_image:
        return _image_data_tokens(item.data)
    if media_type == 'application/pdf':
        return PDF_PAGE_TOKENS * max(1, len(_PDF_PAGE.findall(item.data)))
    if media_type.startswith('text/') or media_type in ('application/json', 'application/xml'):
        return count_text(item.data.decode('utf-8', 'replace')) if count_text is not None else len(item.data)
    if item.is_audio:
        return len(item.data) // _AUDIO_BYTES_PER_TOKEN
    if item.is_video:
        return len(item.data) // _VIDEO_BYTES_PER_TOKEN
    return 0  # a format no provider reads as such: its placeholder is what counts


def _image_data_tokens(data: bytes) -> int:
    try:
        from PIL import Image  # Pillow comes with matplotlib; it reads the size from the header alone

        with warnings.catch_warnings():  # a huge image is only measured here, never decoded
            warnings.simplefilter('ignore', Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as image:
                width, height = image.size
    except Exception:  # bytes no reader takes are still an image to the provider
        return IMAGE_TOKENS
    return image_tokens(width, height)
