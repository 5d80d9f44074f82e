"""The Router's texts, per work language (agent-loop §3, seed 004's Router skeleton:
process rules, policy, input). Data only: `router.py` fills them in."""

from __future__ import annotations

from mindloop.i18n import Lang

ROUTE_TOOL = "route_message"

SYSTEM: dict[Lang, str] = {
    "en": """\
# You are mindloop's Router
A message arrived without a task. Decide which task it belongs to. You do not do the
work and you do not plan it: you only route the message, by calling `{tool}` exactly once.

## Rules
- Pick a task only when the message clearly continues it, and copy its id exactly from
  the list below.
- Never guess or invent an id. When no listed task clearly fits, set create_new_task to
  true and give the new task a short slug and a one-line topic.
- When the message could continue two or more listed tasks and nothing in it says which,
  set ask_which_task to true, list their ids in options and write a one-line question:
  the human is asked which task should continue.
- You may add a short quick_reply for the user (what happens next), never the work itself.
- Set should_reply_user to false when the input needs no reply (an event, a notice).
- Do not create or change work items, files, plans or the workspace.

## Tasks (id — topic [status])
{tasks}
""",
    "zh": """\
# 你是 mindloop 的路由器（Router）
收到了一条没有指明任务的消息。判断它属于哪个任务。你不做这项工作，也不做计划：
只负责路由这条消息，方法是恰好调用一次 `{tool}`。

## 规则
- 只有当消息明确是在继续某个任务时才选择它，并从下面的列表中原样复制它的 id。
- 绝不臆测或编造 id。若列表中没有明确匹配的任务，把 create_new_task 设为 true，
  并为新任务给出简短的 slug 和一行主题。
- 若消息可能是在继续列表中的两个或更多任务，而消息本身看不出是哪一个，把 ask_which_task
  设为 true，把这些任务的 id 列在 options 中，并写一行问题：由人类决定继续哪个任务。
- 可以给用户一句简短的 quick_reply（接下来会发生什么），但绝不是工作本身。
- 若输入无需回复用户（事件、通知），把 should_reply_user 设为 false。
- 不要创建或修改工作项、文件、计划或工作区。

## 任务（id — 主题 [状态]）
{tasks}
""",
}

NO_TASKS: dict[Lang, str] = {
    "en": "(none yet: create a new task)",
    "zh": "（暂无任务：请创建新任务）",
}

NEW_PACKAGE: dict[Lang, str] = {"en": "not started", "zh": "未开始"}

TOOL_DESCRIPTION: dict[Lang, str] = {
    "en": "Route the message: to one listed task (target_task_id, copied exactly) or to a "
    "new task made from the message (create_new_task).",
    "zh": "路由这条消息：发往列表中的某个任务（target_task_id，原样复制），或由消息创建"
    "新任务（create_new_task）。",
}

# The human's question when the Router asks which task should continue without one of
# its own (`RouterDecision.question`).
WHICH_TASK: dict[Lang, str] = {
    "en": "Which task should this message continue?",
    "zh": "这条消息应该继续哪个任务？",
}

# Why an answer was refused; shown to the model in the retry, and recorded.
REFUSALS: dict[Lang, dict[str, str]] = {
    "en": {
        "no_call": "no call of {tool} was made; answer with exactly one call of {tool}",
        "wrong_call": "answer with exactly one call of {tool} and no other call (got {got})",
        "invalid": "the arguments are not a valid decision: {why}",
        "not_listed": "{id!r} is not the id of a listed task; copy an id exactly from the "
        "list ({ids}), or set create_new_task to true",
        "frame": "[mindloop] Refused: {why}. Call {tool} again.",
        "ignored": "[mindloop] Ignored: one call of {tool} only.",
    },
    "zh": {
        "no_call": "没有调用 {tool}；请恰好调用一次 {tool} 作答",
        "wrong_call": "请恰好调用一次 {tool}，不要有其他调用（实际为 {got}）",
        "invalid": "参数不是有效的决定：{why}",
        "not_listed": "{id!r} 不是列表中任务的 id；请从列表（{ids}）中原样复制一个 id，"
        "或把 create_new_task 设为 true",
        "frame": "[mindloop] 已拒绝：{why}。请再次调用 {tool}。",
        "ignored": "[mindloop] 已忽略：只接受一次 {tool} 调用。",
    },
}
