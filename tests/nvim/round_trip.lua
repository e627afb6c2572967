-- Headless Neovim 0.11: margin's full round trip (tests/test_neovim.py). Open the file given on the command line,
-- wait for a focused-feedback diagnostic (a weakness type, not readability), pick the "Simplify paragraph" code
-- action on that paragraph, let the server's workspace/applyEdit change the buffer, and record what happened.
--
-- From the environment: MARGIN_PYTHON, MARGIN_OUTPUT, MARGIN_INIT_OPTIONS, MARGIN_TIMEOUT_MS (as init.lua).
-- The result is written on every path, and Neovim always quits.

local python = assert(os.getenv('MARGIN_PYTHON'), 'MARGIN_PYTHON is not set')
local output = assert(os.getenv('MARGIN_OUTPUT'), 'MARGIN_OUTPUT is not set')
local timeout = tonumber(os.getenv('MARGIN_TIMEOUT_MS') or '') or 30000
local init_options = vim.json.decode(os.getenv('MARGIN_INIT_OPTIONS') or '{}')

vim.lsp.config('margin', {
  cmd = { python, '-m', 'margin.server' },
  filetypes = { 'tex', 'plaintex', 'markdown' },
  root_markers = { '.git' },
  init_options = init_options,
})
vim.lsp.enable('margin')

local function findings(bufnr)
  local found = {}
  for _, diagnostic in ipairs(vim.diagnostic.get(bufnr)) do
    if diagnostic.source == 'margin' and diagnostic.code ~= 'readability' then
      table.insert(found, {
        lnum = diagnostic.lnum,
        col = diagnostic.col,
        end_lnum = diagnostic.end_lnum,
        end_col = diagnostic.end_col,
        code = diagnostic.code,
        message = diagnostic.message,
      })
    end
  end
  return found
end

local function run(bufnr, result)
  result.found = vim.wait(timeout, function()
    return #findings(bufnr) > 0
  end, 50)
  result.findings = findings(bufnr)
  if not result.found then
    return
  end
  local client = vim.lsp.get_clients({ bufnr = bufnr, name = 'margin' })[1]
  local first = result.findings[1]
  vim.api.nvim_win_set_cursor(0, { first.lnum + 1, first.col })

  -- The actions offered there, through Neovim's own request (what `gra` shows).
  local params = vim.lsp.util.make_range_params(0, client.offset_encoding)
  params.context = { diagnostics = {}, triggerKind = 1 }
  local answers = vim.lsp.buf_request_sync(bufnr, 'textDocument/codeAction', params, timeout) or {}
  result.actions = {}
  for _, answer in pairs(answers) do
    for _, action in ipairs(answer.result or {}) do
      table.insert(result.actions, action.title)
    end
  end

  local before = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
  local tick = vim.b[bufnr].changedtick
  vim.lsp.buf.code_action({
    apply = true,
    filter = function(action)
      return action.title == 'Simplify paragraph'
    end,
  })
  result.applied = vim.wait(timeout, function()
    return vim.b[bufnr].changedtick ~= tick
  end, 50)
  result.before = before
  result.after = vim.api.nvim_buf_get_lines(bufnr, 0, -1, true)
end

vim.api.nvim_create_autocmd('VimEnter', {
  once = true,
  callback = function()
    local result = {}
    local ok, error = pcall(run, vim.api.nvim_get_current_buf(), result)
    if not ok then
      result.error = tostring(error)
    end
    local file = assert(io.open(output, 'w'))
    file:write(vim.json.encode(result))
    file:close()
    vim.cmd('qa!')
  end,
})
