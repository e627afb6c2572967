-- Headless Neovim 0.11 config for margin's end-to-end test (tests/test_neovim.py).
--
-- Everything comes from the environment:
--   MARGIN_PYTHON        the Python that runs `-m margin.server`
--   MARGIN_OUTPUT        where to write the JSON result
--   MARGIN_INIT_OPTIONS  JSON initializationOptions (optional)
--   MARGIN_TIMEOUT_MS    how long to wait for each step (optional, default 30000)
--   MARGIN_INLAY_HINTS   optional: "1" to enable inlay hints and record margin's (once diagnostics are in)
--   MARGIN_EASY_TEXT     optional: once diagnostics are in, replace the lines they cover with this text and
--                        wait for margin's diagnostics to go away (an incremental didChange, then a pull)
-- The result is written on every path, and Neovim always quits, so the test never waits on a hung editor.

local python = assert(os.getenv('MARGIN_PYTHON'), 'MARGIN_PYTHON is not set')
local output = assert(os.getenv('MARGIN_OUTPUT'), 'MARGIN_OUTPUT is not set')
local timeout = tonumber(os.getenv('MARGIN_TIMEOUT_MS') or '') or 30000
local init_options = vim.json.decode(os.getenv('MARGIN_INIT_OPTIONS') or '{}')
local easy_text = os.getenv('MARGIN_EASY_TEXT')
local inlay_hints = os.getenv('MARGIN_INLAY_HINTS') == '1'

vim.lsp.config('margin', {
  cmd = { python, '-m', 'margin.server' },
  filetypes = { 'tex', 'plaintex', 'markdown' },
  root_markers = { '.git' },
  init_options = init_options,
})
vim.lsp.enable('margin')

local function margin_diagnostics(bufnr)
  local found = {}
  for _, diagnostic in ipairs(vim.diagnostic.get(bufnr)) do
    if diagnostic.source == 'margin' then
      table.insert(found, {
        lnum = diagnostic.lnum,
        col = diagnostic.col,
        end_lnum = diagnostic.end_lnum,
        end_col = diagnostic.end_col,
        severity = diagnostic.severity,
        message = diagnostic.message,
        source = diagnostic.source,
        code = diagnostic.code,
      })
    end
  end
  return found
end

local function write_result(result)
  local file = assert(io.open(output, 'w'))
  file:write(vim.json.encode(result))
  file:close()
end

local function run(bufnr, result)
  result.filetype = vim.bo[bufnr].filetype
  result.found = vim.wait(timeout, function()
    return #margin_diagnostics(bufnr) > 0
  end, 20)
  result.diagnostics = margin_diagnostics(bufnr)

  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'margin' })[1]
  if client == nil then
    result.error = 'no margin client attached'
    return
  end
  result.client = {
    offset_encoding = client.offset_encoding,
    server_name = client.server_info and client.server_info.name or vim.NIL,
    pull_diagnostics = client:supports_method('textDocument/diagnostic'),
  }
  if not result.found then
    return
  end

  -- Hover where the first diagnostic starts, through Neovim's own request machinery.
  local first = result.diagnostics[1]
  vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })
  local position = vim.lsp.util.make_position_params(0, client.offset_encoding).position
  local answers = vim.lsp.buf_request_sync(bufnr, 'textDocument/hover', {
    textDocument = { uri = vim.uri_from_bufnr(bufnr) },
    position = position,
  }, timeout)
  for _, answer in pairs(answers or {}) do
    if answer.result and answer.result.contents then
      result.hover = answer.result.contents.value
    end
  end

  if inlay_hints then
    vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })
    local hints = {}
    vim.wait(timeout, function()
      hints = vim.lsp.inlay_hint.get({ bufnr = bufnr })
      return #hints > 0
    end, 20)
    result.inlay_hints = {}
    for _, item in ipairs(hints) do
      local hint = item.inlay_hint
      local label = type(hint.label) == 'string' and hint.label or vim.NIL
      -- Neovim keeps the protocol's UTF-16 position; convert it to a byte column as it draws the hint.
      local line = vim.api.nvim_buf_get_lines(bufnr, hint.position.line, hint.position.line + 1, false)[1] or ''
      local col = vim.str_byteindex(line, 'utf-16', hint.position.character, false)
      table.insert(result.inlay_hints, { lnum = hint.position.line, col = col, label = label })
    end
  end

  if easy_text then
    vim.api.nvim_buf_set_lines(bufnr, first.lnum, first.end_lnum + 1, true, { easy_text })
    result.cleared = vim.wait(timeout, function()
      return #margin_diagnostics(bufnr) == 0
    end, 20)
    result.after_edit = margin_diagnostics(bufnr)
  end
end

vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  callback = function()
    local result = {}
    local ok, error = pcall(run, vim.api.nvim_get_current_buf(), result)
    if not ok then
      result.error = tostring(error)
    end
    write_result(result)
    vim.cmd('qa!')
  end,
})
