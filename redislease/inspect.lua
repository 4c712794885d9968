-- inspect.lua: {1, holder, fence, pttl} when KEYS[1] is held, else
-- {0, '', the counter KEYS[2] or '0', 0}.
local cur = redis.call('GET', KEYS[1])
if cur then
  local _, fence, holder = string.match(cur, '^([^%z]*)%z(%d+)%z(.*)$')
  return {1, holder or '', fence or '0', redis.call('PTTL', KEYS[1])}
end
return {0, '', redis.call('GET', KEYS[2]) or '0', 0}
