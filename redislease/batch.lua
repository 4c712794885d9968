-- batch.lua: the helpers of acquiremany.lua and releasemany.lua, after
-- store.go's definitions of acquireParts and releaseParts (the suffixes of
-- a lease's keys that acquire.lua and release.lua take).

-- keysOf returns the keys of lease lk with the suffixes parts.
local function keysOf(lk, parts)
  local ks = {}
  for i, p in ipairs(parts) do
    ks[i] = lk .. p
  end
  return ks
end

-- keyName returns the key whose lease is lk, under a prefix of plen bytes:
-- lk is the prefix, '{', the key with '%', '{' and '}' percent-escaped, '}'.
local function keyName(lk, plen)
  local e = string.sub(lk, plen + 2, -2)
  if string.find(e, '%', 1, true) then
    e = string.gsub(e, '%%(%x%x)', function(h) return string.char(tonumber(h, 16)) end)
  end
  return e
end
