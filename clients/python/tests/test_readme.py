"""The README's examples, run in order in one namespace against the live server."""

from __future__ import annotations

import os
import re
import unittest
from unittest import mock

from live import PACKAGE_ROOT, live

BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def readme_blocks() -> list[str]:
    with open(os.path.join(PACKAGE_ROOT, "README.md"), encoding="utf-8") as f:
        return BLOCK.findall(f.read())


class ReadmeTest(unittest.TestCase):
    def test_examples_run(self) -> None:
        env = live()
        blocks = readme_blocks()
        self.assertGreaterEqual(len(blocks), 8, "README python blocks")
        namespace: dict[str, object] = {"__name__": "readme"}
        example_env = {
            "MEMHOST_URL": env.url,
            "MEMHOST_TOKEN": env.app_token,
            "MEMHOST_AGENT_TOKEN": env.agent_token,
        }
        with mock.patch.dict(os.environ, example_env):
            for i, block in enumerate(blocks, 1):
                # Later blocks use earlier ones' names: stop at the first failure.
                try:
                    exec(compile(block, f"README.md python block {i}", "exec"), namespace)
                except Exception as e:
                    raise AssertionError(f"README python block {i} failed: {e!r}\n{block}") from e


if __name__ == "__main__":
    unittest.main()
