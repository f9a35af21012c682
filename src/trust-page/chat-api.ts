/** The two APIs the page's chat can speak: OpenAI's chat completions and Anthropic's Messages (docs/api.md). */
export type ChatApi = 'chat' | 'messages';

/** One turn of the conversation, in the shape both APIs accept for text. */
export interface ChatMessage {
  role: 'user' | 'assistant';
  content: string;
}

export interface ChatApiShape {
  /** The endpoint, which the receipt must name. */
  path: string;
  /** The streamed request's body. */
  body(model: string, messages: ChatMessage[], maxTokens: number): string;
  /** The key, as that API's clients send it. */
  headers(apiKey: string): Record<string, string>;
  /** The text one stream event's data adds to the answer, if any. */
  textOf(data: unknown): string | undefined;
}

/** The Messages API version the page speaks; Sigil passes it to the engine as sent. */
export const ANTHROPIC_VERSION = '2023-06-01';

export const CHAT_APIS: Readonly<Record<ChatApi, ChatApiShape>> = {
  chat: {
    path: '/v1/chat/completions',
    body: (model, messages, maxTokens) => JSON.stringify({ model, messages, stream: true, max_tokens: maxTokens }),
    headers: (apiKey) => ({ authorization: `Bearer ${apiKey}` }),
    textOf: (data) => {
      const content = (data as { choices?: Array<{ delta?: { content?: unknown } }> }).choices?.[0]?.delta?.content;
      return typeof content === 'string' ? content : undefined;
    },
  },
  messages: {
    path: '/v1/messages',
    // The Messages API requires max_tokens.
    body: (model, messages, maxTokens) => JSON.stringify({ model, max_tokens: maxTokens, messages, stream: true }),
    headers: (apiKey) => ({ 'x-api-key': apiKey, 'anthropic-version': ANTHROPIC_VERSION }),
    textOf: (data) => {
      const event = data as { type?: unknown; delta?: { type?: unknown; text?: unknown } };
      return event.type === 'content_block_delta' && event.delta?.type === 'text_delta' && typeof event.delta.text === 'string' ? event.delta.text : undefined;
    },
  },
};
