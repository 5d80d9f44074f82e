"""The scripted model answers behind `mindloop demo` (a mock-provider script).

Each entry matches the last input message of a step; the first match wins, so the most
specific entries come first.
"""

from __future__ import annotations

DEMO_PROMPT = "demo: get to know the project, start a changelog and record progress"

# The marker only appears once the updated Taskdoc is injected into a later generation.
PROGRESS_TEXT = "- README read; CHANGELOG.md started by the demo."
TASKDOC_MARKER = "## Progress\n" + PROGRESS_TEXT

HUMAN_ANSWER = "Yes, follow Keep a Changelog."

DEMO_TEAM: dict[str, object] = {
    "member_defaults": {"provider": "mock", "model": "mock-model", "fbr-effort": 3},
    "default_responder": "dev",
    "members": {
        "dev": {"name": "Dev", "gofor": "general engineering", "toolsets": ["*"]},
        "reviewer": {"name": "Reviewer", "gofor": "reviews changes", "toolsets": ["fs"]},
    },
}

DEMO_SCRIPT: dict[str, object] = {
    "responses": [
        # 6. After the human's answer: the final report.
        {
            "member": "dev",
            "role": "user",
            "contains": "answer from the human",
            "response": "Done. README read, CHANGELOG.md started, progress recorded in the "
            "Taskdoc, the reviewer approved, three fresh-boots samples agreed, and the "
            "human confirmed the changelog format.",
        },
        # 5. All side dialogs answered: ask the human one question (Q4H).
        {
            "member": "dev",
            "contains": ["provided response", "FBR @self sideline response"],
            "response": "The reviewer and all three FBR samples agree. One decision is "
            "yours:\n!?@human Should CHANGELOG.md follow the Keep a Changelog format?\n"
            "!?Answer yes or no.\n",
        },
        # 3b. Side dialogs: the reviewer reads the file, then answers.
        {
            "member": "reviewer",
            "role": "tool",
            "contains": "# Changelog",
            "response": "Looks good: one clear entry. Consider dating entries.",
        },
        {
            "member": "reviewer",
            "contains": "Please review CHANGELOG.md",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "CHANGELOG.md"}}],
        },
        # 3c. FBR side dialogs (tool-less, same member): reason from the body only.
        {
            "member": "dev",
            "contains": "Fresh Boots Reasoning (FBR) request",
            "response": "Conclusion: keep one changelog entry per release. Reasoning: the "
            "body says the project is new, so a single entry is honest. Unknowns: the "
            "release cadence.",
        },
        # 4. The updated Taskdoc is visible: tellask a teammate and run an FBR round.
        {
            "member": "dev",
            "role": "tool",
            "context_contains": [TASKDOC_MARKER],
            "response": "Progress is recorded (I see it in the Taskdoc now). Asking for a "
            "review and a fresh look.\n"
            "!?@reviewer Please review CHANGELOG.md\n!?Reply with one line.\n\n"
            "!?@self\n!?You are doing tool-less FBR. Use only this text as context.\n"
            "!?Goal: how many changelog entries should a brand-new project start with?\n",
        },
        # 3. README read: write a file and change the Taskdoc in one step.
        {
            "member": "dev",
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
                {
                    "name": "change_mind",
                    "arguments": {"selector": "progress", "content": PROGRESS_TEXT},
                },
            ],
        },
        # 2. Listing seen: read the README.
        {
            "member": "dev",
            "role": "tool",
            "contains": "README.md",
            "response": "There is a README; reading it.",
            "tool_calls": [{"name": "read_file", "arguments": {"path": "README.md"}}],
        },
        # 1. The user's request: look around.
        {
            "match": DEMO_PROMPT,
            "thinking": "Start by looking at what is in the workspace.",
            "response": "Let me look around the project first.",
            "tool_calls": [{"name": "list_dir", "arguments": {"path": "."}}],
        },
    ]
}
