"""The scripted model answers behind `mindloop demo` (a mock-provider script).

Each entry matches the last input message of a step; entries are ordered most specific
first because the first match wins.
"""

from __future__ import annotations

DEMO_PROMPT = "demo: get to know the project, start a changelog and record progress"

# The marker only appears once the updated Taskdoc is injected into a later generation.
PROGRESS_TEXT = "- README read; CHANGELOG.md started by the demo."
TASKDOC_MARKER = "## Progress\n" + PROGRESS_TEXT

DEMO_SCRIPT: dict[str, object] = {
    "responses": [
        {
            "role": "tool",
            "context_contains": [TASKDOC_MARKER],
            "response": "Done. I read README.md, created CHANGELOG.md with a first entry, and "
            "recorded the progress in the Taskdoc (I can see the updated Progress section "
            "in my context now).",
        },
        {
            "role": "tool",
            "contains": "# My project",
            "response": "README read. Writing the changelog and updating progress together.",
            "tool_calls": [
                {
                    "name": "write_file",
                    "arguments": {
                        "path": "CHANGELOG.md",
                        "content": "# Changelog\n\n- Project set up with mindloop.\n",
                    },
                },
                {"name": "change_mind", "arguments": {"selector": "progress", "content": PROGRESS_TEXT}},
            ],
        },
        {
            "role": "tool",
            "contains": "README.md",
            "response": "There is a README; reading it.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
        },
        {
            "match": DEMO_PROMPT,
            "thinking": "Start by looking at what is in the workspace.",
            "response": "Let me look around the project first.",
            "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
        },
    ]
}
