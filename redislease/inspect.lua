-- inspect.lua: {1, holder, fence, pttl, live readers} when KEYS[1] is held
-- (readers: 0 unless held shared; see readers.lua), else
-- {0, '', the counter KEYS[2] or '0', 0, 0}.
local cur = redis.call('GET', KEYS[1])
if cur then
  local tok, fence, holder = decode(cur, KEYS[1])
  local n = 0
  if tok == '' then
    local _, now = clock()
    n = redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')
  end
  return {1, holder or '', fence or '0', redis.call('PTTL', KEYS[1]), n}
end
return {0, '', redis.call('GET', KEYS[2]) or '0', 0, 0}
