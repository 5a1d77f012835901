from mappa.agents.tool_calls import extract_python_block, replace_python_block


def test_fenced_python_block():
    text = "Here:\n```python\nprint(6 * 7)\n```\nDone. ```python\nprint(1)\n```"
    assert extract_python_block(text) == "print(6 * 7)"


def test_bare_and_unclosed_fences():
    assert extract_python_block("```\nx = 1\nprint(x)\n```") == "x = 1\nprint(x)"
    assert extract_python_block("```py\nprint(2)") == "print(2)"


def test_no_code():
    assert extract_python_block("The answer is 4.") is None
    assert extract_python_block("```python\n\n```") is None


def test_a_block_is_rewritten_where_extract_finds_it():
    text = "Here:\n```Python3\nprint(6 * 7)\n```\nDone."
    assert replace_python_block(text, lambda code: "x = 1 / 0\n" + code) == (
        "Here:\n```Python3\nx = 1 / 0\nprint(6 * 7)\n```\nDone."
    )
    assert replace_python_block("no code here", lambda code: code) is None
    assert replace_python_block(text, lambda code: None) is None
