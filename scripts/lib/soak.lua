-- wrk script for scripts/soak.sh: every response is checked byte for byte.
--
-- wrk -s soak.lua URL -- ROOT MODE
--   ROOT  the --root directory the server serves (made by soak_client.py)
--   MODE  "pipelined": one write carries a mixed batch of requests
--                      (plaintext, json, a static file, a Range slice of
--                      big.bin, an echo POST);
--         "keepalive": one plaintext or json request at a time.
--
-- wrk's response() callback does not say which connection or request an
-- answer belongs to, so each request of the mix has a body no other request
-- has: an answer is right if its body is exactly one of the expected bodies
-- with that request's status. Each kind's count is reported too; with a
-- fixed mix per batch they keep its ratios (to within the batches in flight
-- at the end), so answering one request with another's response shows.

local HELLO = "Hello, World!"
local JSON = '{"message":"Hello, World!"}'
local RANGE_FROM, RANGE_TO = 1000003, 1004098 -- 4,096 bytes of big.bin

local function slurp(path, from, len)
   local f = assert(io.open(path, "rb"))
   if from then f:seek("set", from) end
   local data = len and f:read(len) or f:read("*a")
   f:close()
   return data
end

init = function(args)
   local root = args[1] or error("usage: -- ROOT MODE")
   local mode = args[2] or "pipelined"
   -- A per-thread echo body, so echoes from different threads differ.
   local echo_body = "soak-echo-" .. tostring(math.random(1, 1e9)) .. string.rep("e", 300)
   expect = {}
   kinds = {}
   local function want(name, status, body)
      expect[body] = { status = status, kind = name }
      table.insert(kinds, name)
      _G["n_" .. name] = 0
   end
   local r = {}
   if mode == "keepalive" then
      want("plaintext", 200, HELLO)
      want("json", 200, JSON)
      r[1] = wrk.format("GET", "/_httplite/plaintext")
      r[2] = wrk.format("GET", "/_httplite/json")
      -- keep-alive: one request per write, alternating.
      local i = 0
      request = function()
         i = i % 2 + 1
         return r[i]
      end
   else
      want("plaintext", 200, HELLO)
      want("json", 200, JSON)
      want("small", 200, slurp(root .. "/small.txt"))
      want("range", 206, slurp(root .. "/big.bin", RANGE_FROM, RANGE_TO - RANGE_FROM + 1))
      want("echo", 200, echo_body)
      -- 16 per write, mostly the cheap plaintext (this client is the bulk).
      local batch = {}
      for i = 1, 16 do
         local r
         if i == 11 or i == 12 then
            r = wrk.format("GET", "/_httplite/json")
         elseif i == 13 then
            r = wrk.format("GET", "/small.txt")
         elseif i == 14 then
            r = wrk.format("GET", "/big.bin", { Range = "bytes=" .. RANGE_FROM .. "-" .. RANGE_TO })
         elseif i == 15 then
            r = wrk.format("POST", "/_httplite/echo",
               { ["Content-Type"] = "application/octet-stream" }, echo_body)
         else
            r = wrk.format("GET", "/_httplite/plaintext")
         end
         table.insert(batch, r)
      end
      local req = table.concat(batch)
      request = function()
         return req
      end
   end
   ok = 0
   bad = 0
   first_bad = ""
end

response = function(status, headers, body)
   local e = expect[body]
   if e and e.status == status then
      ok = ok + 1
      local k = "n_" .. e.kind
      _G[k] = _G[k] + 1
   else
      bad = bad + 1
      if first_bad == "" then
         first_bad = "status " .. status .. " body " .. string.format("%q", string.sub(body, 1, 80))
      end
   end
end

local threads = {}

setup = function(thread)
   table.insert(threads, thread)
end

done = function(summary, latency, requests)
   local ok_total, bad_total = 0, 0
   local per_kind = {}
   local names = {}
   local first = ""
   for _, t in ipairs(threads) do
      ok_total = ok_total + t:get("ok")
      bad_total = bad_total + t:get("bad")
      if first == "" then first = t:get("first_bad") end
      for _, name in ipairs({ "plaintext", "json", "small", "range", "echo" }) do
         local v = t:get("n_" .. name)
         if v then
            if not per_kind[name] then table.insert(names, name) end
            per_kind[name] = (per_kind[name] or 0) + v
         end
      end
   end
   local parts = {}
   for _, name in ipairs(names) do
      table.insert(parts, name .. "=" .. per_kind[name])
   end
   io.write(string.format("SOAK_WRK ok=%d bad=%d responses=%d %s\n",
      ok_total, bad_total, summary.requests, table.concat(parts, " ")))
   io.write(string.format("SOAK_WRK_ERRORS connect=%d read=%d write=%d status=%d timeout=%d\n",
      summary.errors.connect, summary.errors.read, summary.errors.write,
      summary.errors.status, summary.errors.timeout))
   if first ~= "" then
      io.write("SOAK_WRK_FIRST_BAD " .. first .. "\n")
   end
end
