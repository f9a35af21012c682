/** One fenced code block of a Markdown file, as a reader sees it. */
export interface FencedBlock {
  /** The first word of the info string (```sh → "sh"), lowercased; "" when there is none. */
  language: string;
  /** The block's text, without its fences, ending with a newline. */
  code: string;
  /** The 1-based line of the opening fence. */
  line: number;
  /** The reason of a `<!-- not run: REASON -->` comment on the last non-blank line before the fence, if there is one. */
  notRun?: string;
}

const OPENING = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/;
const NOT_RUN = /^\s*<!--\s*not run:\s*(.+?)\s*-->\s*$/;

/** The fenced code blocks of a Markdown text (CommonMark's fences: ``` or ~~~, closed by a fence of the same kind at least as long). */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const opening = OPENING.exec(lines[i]!);
    if (opening === null) continue;
    const fence = opening[1]!;
    const closing = new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`);
    let end = i + 1;
    while (end < lines.length && !closing.test(lines[end]!)) end++;
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const notRun = before >= 0 ? NOT_RUN.exec(lines[before]!)?.[1] : undefined;
    const code = lines.slice(i + 1, end).join('\n');
    blocks.push({ language: opening[2]!.toLowerCase(), code: `${code}\n`, line: i + 1, ...(notRun !== undefined && { notRun }) });
    i = end;
  }
  return blocks;
}
