"""Prompts are built in one place: instructions as the system message, the observation as the user's, through the
chat template; the shared prefix is found at a token boundary; answers end with the template's end token."""

from __future__ import annotations

from llm_gym.lm.prompts import PromptBuilder, chat_messages, observation_text
from llm_gym.lm.testing import tiny_tokenizer


def test_chat_messages_and_observation_text() -> None:
    assert chat_messages("rules", "obs") == [{"role": "system", "content": "rules"}, {"role": "user", "content": "obs"}]
    assert chat_messages("", "obs") == [{"role": "user", "content": "obs"}]
    assert chat_messages("rules", "obs", system_role=False) == [{"role": "user", "content": "rules\n\nobs"}]
    assert observation_text({"image": object(), "text": "seen"}) == "seen"
    assert observation_text(7) == "7"


def test_prompt_text_prefix_and_answer_end() -> None:
    tokenizer = tiny_tokenizer()
    builder = PromptBuilder(tokenizer, "Play well.")
    text = builder.text("state 1")
    assert (
        text == "<|im_start|>system\nPlay well.<|im_end|>\n<|im_start|>user\nstate 1<|im_end|>\n<|im_start|>assistant\n"
    )
    (encoded,) = builder.encode(["state 1"])
    assert encoded.uses_prefix
    assert tokenizer.decode(builder.prefix_ids) == "<|im_start|>system\nPlay well.<|im_end|>\n<|im_start|>user"
    assert builder.answer_end_ids == [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert builder.choice_ids("LEFT") == [
        *tokenizer("LEFT", add_special_tokens=False)["input_ids"],
        *builder.answer_end_ids,
    ]
    assert builder.choice_ids("LEFT", with_end=False) == tokenizer("LEFT", add_special_tokens=False)["input_ids"]


def test_tokenizer_without_chat_template_gets_a_plain_layout() -> None:
    tokenizer = tiny_tokenizer()
    tokenizer.chat_template = None
    builder = PromptBuilder(tokenizer, "Rules.")
    assert builder.text("obs") == "Rules.\n\nobs\n\nAnswer: "
    assert builder.answer_end_ids == [tokenizer.eos_token_id]
    assert all(p.uses_prefix for p in builder.encode(["a", "bc"]))


def test_a_prompt_with_its_own_rules_gets_them_and_skips_the_cached_prefix() -> None:
    tokenizer = tiny_tokenizer()
    builder = PromptBuilder(tokenizer, "Play well.")
    same, other, default = builder.encode(["s1", "s2", "s3"], instructions=["Play well.", "Other game.", None])
    assert same.uses_prefix and default.uses_prefix and not other.uses_prefix
    assert tokenizer.decode(other.ids) == builder.text("s2", instructions="Other game.")
    assert "Other game." in tokenizer.decode(other.ids) and "Play well." not in tokenizer.decode(other.ids)
    assert default.ids == builder.encode(["s3"])[0].ids
