// A no-op MCP server on the official TypeScript SDK, as its README starts one: the floor the
// stdio benchmark measures beside gimlet (`bench/floor-compare.sh`). It answers `read` with
// the text of the file named on its command line (read once, at start) and any other tool
// with "ok", touching no file per call.
//
//   node bench/noop-server.mjs ANSWER_FILE
import { readFileSync } from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";

const answer = readFileSync(process.argv[2], "utf8");
const server = new McpServer({ name: "noop", version: "1.0.0" });
server.registerTool("read", { description: "Answers a fixed text" }, async () => ({
  content: [{ type: "text", text: answer }],
}));
server.registerTool("edit", { description: "Answers ok" }, async () => ({
  content: [{ type: "text", text: "ok" }],
}));
await server.connect(new StdioServerTransport());
