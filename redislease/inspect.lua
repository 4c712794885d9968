-- inspect.lua: report who holds a lease.
--
-- KEYS[1] lease hash, KEYS[2] fence counter
--
-- Returns {1, holder, fence, pttl} when held, or {0, '', last fence, 0} when
-- free, where last fence is '' if no fence was ever granted (or the counter
-- was lost). Fences are decimal strings.

local cur = redis.call('HMGET', KEYS[1], 'token', 'holder', 'fence')
if cur[1] then
  return {1, cur[2] or '', cur[3] or '0', redis.call('PTTL', KEYS[1])}
end
return {0, '', redis.call('GET', KEYS[2]) or '', 0}
