// `greet`, the smallest JavaScript tool: a test fixture that
// host/tests/all/componentize.rs builds with componentize-js at test time
// against wit/ (world longhand:tool/tool).

export const tools = {
  describe() {
    return {
      name: "greet-js",
      version: "0.1.0",
      description: "Says hello (JavaScript).",
      tools: [
        {
          name: "greet",
          description: "Greets someone by name.",
          inputSchema: JSON.stringify({
            type: "object",
            properties: { name: { type: "string" } },
            required: ["name"],
          }),
          effect: "read-only",
        },
      ],
      requests: { dirs: [], hosts: [], env: [], secrets: [] },
    };
  },

  call(name, input) {
    if (name !== "greet") {
      throw { tag: "failed", val: `no tool ${name}` };
    }
    const who = JSON.parse(input).name;
    return JSON.stringify({ greeting: `Hello, ${who}!` });
  },
};
