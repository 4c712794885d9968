-- inspect.lua: report who holds a lease.
--
-- KEYS[1] lease (token NUL fence NUL holder, see grant.lua), KEYS[2] fence
-- counter
--
-- Returns {1, holder, fence, pttl} when held, or {0, '', last fence, 0} when
-- free, where last fence is '' if no fence was ever granted (or the counter
-- was lost). Fences are decimal strings.

local cur = redis.call('GET', KEYS[1])
if cur then
  local _, fence, holder = string.match(cur, '^([^%z]*)%z(%d+)%z(.*)$')
  return {1, holder or '', fence or '0', redis.call('PTTL', KEYS[1])}
end
return {0, '', redis.call('GET', KEYS[2]) or '', 0}
