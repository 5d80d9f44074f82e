"""The work languages mindloop writes its runtime texts in (bottom layer: imports nothing).

`Lang` is the one type for a work language; every layer that picks a text by language
(config, taskdoc, tools, the engine) imports it from here.
"""

from __future__ import annotations

from typing import Literal

Lang = Literal["en", "zh"]
