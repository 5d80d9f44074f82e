"""Fixed runtime copy that goes into every system prompt, per work language."""

from __future__ import annotations

RUNTIME_RULES = {
    "en": """\
# How you work in mindloop
- You are one member of a team working on a task. The task's Taskdoc (goals, constraints,
  progress) is shown below and is refreshed before every reply you write.
- All paths you pass to tools are relative to the runtime workspace (rtws), the project
  directory. Nothing outside it is reachable.
- Use function tools to act (read and write files, run commands). Independent tool calls
  may be issued together in one reply; they run concurrently.
- When the work asked of you is done, answer with a final message and no tool calls.
""",
    "zh": """\
# 你在 mindloop 中如何工作
- 你是团队的一名成员，正在处理一个任务。任务的 Taskdoc（目标、约束、进展）见下文，
  每次回复前都会刷新。
- 传给工具的所有路径都相对于运行时工作区（rtws，即项目目录）；其外的任何位置都不可达。
- 通过函数工具行动（读写文件、运行命令）。彼此独立的工具调用可以在同一次回复中一起发出，
  它们会并发执行。
- 当被要求的工作完成时，给出不含工具调用的最终回复。
""",
}

DEFAULT_PERSONA = {
    "en": "You are {name}, a capable and careful member of a software team.",
    "zh": "你是 {name}，团队中能干且细心的一员。",
}

# Heads the member's own `.minds/team/<member>/self.md` (agent-loop §9.1); `sha` is the
# start of the file's sha256, the base a `self_md_patch` call names.
SELF_MD_HEADING = {
    "en": "# Your self.md (sha256 {sha})\nHow you work, in your own words; changed only "
    "through self-improvement (`self_md_patch`).",
    "zh": "# 你的 self.md（sha256 {sha}）\n你用自己的话写下的工作方式；只能在自我改进阶段通过 "
    "`self_md_patch` 修改。",
}

STEP_LIMIT_NOTE = {
    "en": "[mindloop] Stopped after {n} steps in one drive (the per-drive step limit). "
    "Send a message to continue.",
    "zh": "[mindloop] 单次驱动已达 {n} 步上限，已停止。发送消息即可继续。",
}


def text_for(table: dict[str, str], lang: str) -> str:
    return table.get(lang) or table["en"]
