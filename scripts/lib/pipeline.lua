-- wrk script: 16 pipelined requests per write (DEPTH overrides).
init = function(args)
   local depth = tonumber(os.getenv("DEPTH") or "16")
   local path = os.getenv("WRK_PATH") or "/_httplite/plaintext"
   local r = {}
   for i = 1, depth do
      r[i] = wrk.format("GET", path)
   end
   req = table.concat(r)
end

request = function()
   return req
end
