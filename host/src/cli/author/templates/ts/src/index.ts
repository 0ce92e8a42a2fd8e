// The `{{name}}` tool component.
import { tool, exportTools, s, InvalidInput } from '@longhand/tool';

export const greet = tool({
  name: 'greet',
  description: 'Say hello to someone by name.',
  effect: 'read-only',
  input: s.object({ name: s.describe(s.string(), 'Who to greet.') }),
  run({ name }): { greeting: string } {
    if (!name.trim()) throw new InvalidInput('`name` is empty');
    return { greeting: `Hello, ${name}!` };
  },
});

// The component's `longhand:tool/tools` export.
export const tools = exportTools({
  name: '{{name}}',
  version: '0.1.0',
  description: 'Says hello.',
  tools: [greet],
});
