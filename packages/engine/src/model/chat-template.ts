/**
 * The Jinja chat template of generated models, in Phi-3's control tokens. The generation prompt ends
 * on `<|assistant|>` itself, so that token is always the last one a scripted model reads before answering.
 */
export const GENERATED_CHAT_TEMPLATE =
  "{{ bos_token }}{% for message in messages %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endfor %}" +
  "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}";

export const TEMPLATE_CONTROL_TOKENS = ['<|system|>', '<|user|>', '<|assistant|>', '<|end|>'] as const;
export const ANSWER_MARKER_TOKEN = '<|assistant|>';
export const END_OF_TURN_TOKEN = '<|end|>';
