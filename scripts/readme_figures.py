"""List every number in README.md and the check that covers it (issue 22, item 2).

    python scripts/readme_figures.py [--uncovered]

The rules are tests/readme_figures.py's; the checks are tests/test_readme_commands.py's (PROSE, OUTPUTS, the notes
of the README's commands, NOT_FIGURES). Exit 1 when a number is uncovered.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.readme_figures import report  # noqa: E402
from tests.test_readme_commands import README, readme_inventory  # noqa: E402


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    entries = readme_inventory(README.read_text())
    print(report(entries, only_uncovered="--uncovered" in argv))
    return 1 if any(e.check is None for e in entries) else 0


if __name__ == "__main__":
    sys.exit(main())
