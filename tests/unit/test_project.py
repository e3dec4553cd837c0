"""The project and the conversation of a request, from what each agent sends however it words it
(hand-made fixtures shaped like each agent's release; wordings looked up in the agents' sources),
and the conversation's own scope when none is stated."""

from __future__ import annotations

import pytest

from headroom_core.db.sealed import Sealer
from headroom_core.project import find_project, is_conversation, key_rank, project_label, stated_directory
from headroom_core.scope import request_conversation

CC1_SYSTEM = (
    "You are Claude Code, Anthropic's official CLI for Claude.\n\n"
    "Here is useful information about the environment you are running in:\n<env>\nWorking directory: /home/ann/shop\n"
    "Is directory a git repo: Yes\nPlatform: linux\nToday's date: 2025-08-06\n</env>\nYou are powered by the model named Sonnet 4."
)
CC2_REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# Environment\n"
    "You have been invoked in the following environment: \n - Primary working directory: /home/ann/garden\n"
    "  - Is a git repository: true\n  - Platform: linux\n  - OS Version: Linux 6.8\n</system-reminder>"
)
CODEX_ENV = (
    "<environment_context>\n  <cwd>/srv/codex-work</cwd>\n  <approval_policy>never</approval_policy>\n"
    "  <sandbox_mode>danger-full-access</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>"
)
OPENCODE_SYSTEM = (
    "You are powered by the model named gpt-5. The exact model ID is openai/gpt-5\n"
    "Here is some useful information about the environment you are running in:\n<env>\n"
    "  Working directory: /tmp/oc-app\n  Workspace root folder: /\n  Is directory a git repo: no\n  Platform: linux\n"
    "  Today's date: Thu Jan 01 2026\n</env>\n<directories>\n  \n</directories>"
)
GEMINI_2025 = (
    "This is the Gemini CLI. We are setting up the context for our chat.\n  Today's date is Monday, 4 August 2025.\n"
    "  My operating system is: linux\n  I'm currently working in the directory: /home/gem/site\n"
    "  Here is the folder structure of the current working directories:\n\nShowing up to 200 items\n/home/gem/site/\n"
)
GEMINI_2026 = (
    "<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\nToday's date is Monday, 4 May 2026.\n"
    "My operating system is: linux\nThe project's temporary directory is: /root/.gemini/tmp/4f2a\n"
    "- **Workspace Directories:**\n  - /home/gem/app\n  - /home/gem/lib\n- **Directory Structure:**\n\n/home/gem/app/\n</session_context>"
)


def anthropic(system, first_user, *rest):
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": first_user}, *rest],
    }
    if system is not None:
        body["system"] = system
    return body


@pytest.mark.parametrize(
    "text, want",
    [
        (CC1_SYSTEM, "/home/ann/shop"),
        (CC2_REMINDER, "/home/ann/garden"),
        (CODEX_ENV, "/srv/codex-work"),
        (OPENCODE_SYSTEM, "/tmp/oc-app"),  # its working directory, not the workspace root "/"
        (GEMINI_2025, "/home/gem/site"),
        (GEMINI_2026, "/home/gem/app"),  # the first workspace directory, never the temporary one
        ("<env>\nWORKING DIRECTORY: /Up/Case/\nPLATFORM: darwin\n</env>", "/Up/Case"),
        ("Platform: win32\ncwd = C:\\Users\\ann\\proj\n", "C:\\Users\\ann\\proj"),
        ("<env>\n  * **Current working directory:** `/home/x/md`\n  * OS: linux\n</env>", "/home/x/md"),
        ("<workdir>/opt/next</workdir>", "/opt/next"),
        ("<env>\nWorking directory: /home/a b/with space\nShell: zsh\n</env>", "/home/a b/with space"),
    ],
    ids=[
        "claude-code-1.x",
        "claude-code-2.x",
        "codex",
        "opencode",
        "gemini-2025",
        "gemini-2026",
        "upper-case",
        "windows-cwd",
        "markdown",
        "tag",
        "space",
    ],
)
def test_each_agents_wording_gives_its_directory(text, want):
    found = stated_directory(text)
    assert found is not None and found.path == want


@pytest.mark.parametrize(
    "text",
    [
        "please check my working directory: /etc/passwd and tell me",  # prose, not a block
        "<env>\nWorking directory: relative/path\nPlatform: linux\n</env>",  # not absolute
        "<env>\nTemporary directory: /tmp/x\nCache directory: /var/cache\n</env>",  # other directories
        "<env>\nPlatform: linux\nShell: bash\n</env>",
        "src/app.py:12: error: Working directory: /not/this",
    ],
)
def test_no_directory_where_none_is_stated_as_such(text):
    assert stated_directory(text) is None


@pytest.mark.parametrize(
    "text, want",
    [
        ("You are a coding agent. Working directory: /work/shop\nBe careful.", "/work/shop"),
        ("Working directory: /lonely", "/lonely"),
        ("You are Claude Code. Current directory: C:\\src\\app", "C:\\src\\app"),
    ],
)
def test_a_working_directory_after_a_sentence_ending_its_line_is_a_weaker_statement(text, want):
    found = stated_directory(text)
    assert found is not None and found.path == want and found.rank == 2


def test_a_block_statement_beats_a_sentence_one():
    text = "You are an agent. Working directory: /from/sentence\n<env>\nWorking directory: /from/block\nPlatform: linux\n</env>"
    assert stated_directory(text).path == "/from/block"
    # never a workspace key after a sentence, never a path that does not end its line
    assert stated_directory("Be brief. Workspace folder: /ws") is None
    assert stated_directory("Be brief. Working directory: /a then more words") is not None  # a path may hold spaces
    assert stated_directory("see src/a.py:3: Working directory: /x") is None


def test_key_ranks():
    assert key_rank("Primary working directory") == 0 and key_rank("cwd") == 0 and key_rank("Current directory") == 0
    assert key_rank("Workspace root folder") == 1 and key_rank("**Workspace Directories**") == 1
    assert key_rank("The project's temporary directory is") is None and key_rank("Platform") is None


def test_claude_code_2_states_it_in_the_first_user_message_not_the_system_prompt():
    body = anthropic(
        [{"type": "text", "text": "You are Claude Code, Anthropic's official CLI for Claude."}],
        [
            {"type": "text", "text": CC2_REMINDER},
            {"type": "text", "text": "fix the failing test", "cache_control": {"type": "ephemeral"}},
        ],
    )
    assert find_project({}, body) == "/home/ann/garden"


def test_claude_code_1_system_prompt():
    assert find_project({}, anthropic(CC1_SYSTEM, "hi")) == "/home/ann/shop"


def test_codex_environment_context_in_a_developer_or_user_item_of_responses_input():
    for role in ("developer", "user"):
        body = {
            "model": "gpt-5-codex",
            "instructions": "You are Codex, based on GPT-5.",
            "input": [
                {"type": "message", "role": role, "content": [{"type": "input_text", "text": CODEX_ENV}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list the files"}]},
            ],
        }
        assert find_project({}, body) == "/srv/codex-work"


def test_opencode_system_message_of_chat_completions():
    body = {
        "model": "gpt-5",
        "messages": [
            {"role": "system", "content": "You are opencode."},
            {"role": "system", "content": OPENCODE_SYSTEM},
            {"role": "user", "content": "hi"},
        ],
    }
    assert find_project({}, body) == "/tmp/oc-app"


def test_environment_block_in_a_later_system_or_developer_message():
    turns = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    body = {
        "model": "gpt-5",
        "messages": [
            *turns,
            {"role": "developer", "content": [{"type": "text", "text": CODEX_ENV}]},
            {"role": "user", "content": "e"},
        ],
    }
    assert find_project({}, body) == "/srv/codex-work"
    # a later USER message is the user's text (or pasted output), never the environment
    body = {"model": "gpt-5", "messages": [*turns, {"role": "user", "content": CC1_SYSTEM}]}
    assert find_project({}, body) is None


def test_tool_results_and_assistant_turns_are_never_read():
    output = "<env>\nWorking directory: /from/a/tool\nPlatform: linux\n</env>"
    body = anthropic(
        "You are an agent.",
        "go",
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": output},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "env"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": output}]},
    )
    assert find_project({}, body) is None


def test_a_working_directory_beats_a_workspace_stated_earlier():
    body = anthropic(
        "<env>\nWorkspace root folder: /repo\nPlatform: linux\n</env>", [{"type": "text", "text": CC2_REMINDER}]
    )
    assert find_project({}, body) == "/home/ann/garden"


def test_the_header_wins():
    assert find_project({"x-headroom-project": "  team-a  "}, anthropic(CC1_SYSTEM, "hi")) == "team-a"


SEALER = Sealer(b"k" * 32)


def conv(body, key="sk-one", headers=None):
    return request_conversation(
        {"x-api-key": key, **(headers or {})}, body, "/v1/messages", SEALER, "anthropic-messages"
    )


def test_a_conversation_without_a_project_is_its_own_scope():
    first = anthropic("You are a helpful assistant.", "summarise this article")
    later = anthropic(
        "You are a helpful assistant.",
        "summarise this article",
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "shorter"},
    )
    other = anthropic("You are a helpful assistant.", "translate this poem")
    a, a2, b = conv(first), conv(later), conv(other)
    assert is_conversation(a.scope.project) and is_conversation(b.scope.project)
    assert a.scope.project == a2.scope.project and a.session_key == a2.session_key  # one conversation, turn after turn
    assert a.scope.project != b.scope.project and a.scope.id != b.scope.id  # unrelated: nothing shared
    assert "global" not in (a.scope.project, b.scope.project)
    # the same opening from another credential is another conversation
    assert conv(first, key="sk-two").scope.project != a.scope.project
    # an explicit session names the conversation
    s1 = conv(first, headers={"x-headroom-session": "s1"})
    assert (
        s1.scope.project != a.scope.project
        and conv(other, headers={"x-headroom-session": "s1"}).scope.project == s1.scope.project
    )
    assert project_label(a.scope.project).startswith("(conversation ")


def test_a_named_project_is_shared_by_its_conversations():
    a = conv(anthropic(CC1_SYSTEM, "task one"))
    b = conv(anthropic(CC1_SYSTEM, "task two"))
    assert a.scope.project == b.scope.project == "/home/ann/shop" and a.scope.id == b.scope.id
    assert a.session_key != b.session_key
